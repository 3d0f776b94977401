//! A counting allocator: the heap a test process holds now and the most it held since a
//! mark, so a simulation can report what a function's call held at its peak (the scale
//! simulator installs it with `#[global_allocator]`; in a process that does not, every
//! figure here stays 0).
//!
//! A store that stands in for DynamoDB allocates what DynamoDB would hold, not the
//! function (the in-memory store sorts every pending row to answer a bounded read): such a
//! call runs inside a [`Transient`], which keeps its peak out of the figure and counts only
//! what the call handed back and is still held when it returns. What the simulation keeps
//! about the calls (its meter, its log of requests) is allocated [`uncounted`]: never in a
//! figure, not when it is made nor when it is freed.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Allocations made now are the simulation's bookkeeping, never counted.
    static UNCOUNTED: Cell<bool> = const { Cell::new(false) };
}

/// Run `f` with its allocations left out of every figure, now and when they are freed:
/// what a simulation keeps about a call (its meter, its log) is not the call's memory.
pub fn uncounted<R>(f: impl FnOnce() -> R) -> R {
    let before = UNCOUNTED.with(|u| u.replace(true));
    let out = f();
    UNCOUNTED.with(|u| u.set(before));
    out
}

/// Allocations left out of every figure until it is dropped (a stretch of bookkeeping
/// that spans awaits or many statements).
#[derive(Debug)]
pub struct UncountedScope {
    before: bool,
}

impl UncountedScope {
    pub fn begin() -> UncountedScope {
        UncountedScope {
            before: UNCOUNTED.with(|u| u.replace(true)),
        }
    }
}

impl Drop for UncountedScope {
    fn drop(&mut self) {
        UNCOUNTED.with(|u| u.set(self.before));
    }
}

/// Each block carries a header saying whether it was counted, so that its free is
/// counted the same way: the header is the block's alignment, at least 16 bytes.
fn header(layout: Layout) -> usize {
    layout.align().max(16)
}

/// The system allocator, counting the bytes live and their peak.
#[derive(Debug)]
pub struct CountingAlloc;

// the one unsafe impl of the workspace: `GlobalAlloc` is an unsafe trait
#[allow(unsafe_code)]
// SAFETY: every block is the system allocator's, `header` bytes larger and aligned as
// asked; the pointer handed out is `header` bytes in (a multiple of the alignment), and
// every free and reallocation goes back to the block's start with the same layout.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let head = header(layout);
        let Ok(outer) = Layout::from_size_align(layout.size() + head, layout.align().max(16)) else {
            return std::ptr::null_mut();
        };
        // SAFETY: `outer` has a non-zero size.
        let base = unsafe { System.alloc(outer) };
        if base.is_null() {
            return base;
        }
        let counted = !UNCOUNTED.try_with(Cell::get).unwrap_or(true);
        // SAFETY: the header is inside the block and aligned for a usize (16 at least).
        unsafe { (base as *mut usize).write(usize::from(counted)) };
        if counted {
            grew(layout.size());
        }
        // SAFETY: `head` is within the block.
        unsafe { base.add(head) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let head = header(layout);
        // SAFETY: `ptr` came from `alloc` with this layout: its block starts `head` before.
        let base = unsafe { ptr.sub(head) };
        // SAFETY: the header written by `alloc`.
        let counted = unsafe { (base as *const usize).read() } == 1;
        if counted {
            CURRENT.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        let outer = Layout::from_size_align(layout.size() + head, layout.align().max(16))
            .unwrap_or(Layout::new::<u8>());
        // SAFETY: the block `alloc` made with `outer`.
        unsafe { System.dealloc(base, outer) };
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let Ok(new_layout) = Layout::from_size_align(new_size, layout.align()) else {
            return std::ptr::null_mut();
        };
        // SAFETY: a fresh block, the old one's bytes copied, the old one freed.
        unsafe {
            let moved = self.alloc(new_layout);
            if !moved.is_null() {
                std::ptr::copy_nonoverlapping(ptr, moved, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
            moved
        }
    }
}

fn grew(bytes: usize) {
    let now = CURRENT.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

/// The heap's bytes live now.
pub fn current() -> usize {
    CURRENT.load(Ordering::Relaxed)
}

/// A mark: the peak from here on is measured against the heap held here.
#[derive(Debug, Clone, Copy)]
pub struct Mark {
    base: usize,
}

impl Mark {
    /// Start measuring (the peak so far is forgotten).
    pub fn now() -> Mark {
        let base = current();
        PEAK.store(base, Ordering::Relaxed);
        Mark { base }
    }

    /// The most the heap held above the mark since it was made.
    pub fn peak_above(&self) -> usize {
        PEAK.load(Ordering::Relaxed).saturating_sub(self.base)
    }
}

/// A stretch whose own peak is not the caller's (a stand-in store's work): when it ends,
/// the peak is put back to what it was before it, or to what is held then if more.
#[derive(Debug)]
pub struct Transient {
    peak_before: usize,
}

impl Transient {
    pub fn begin() -> Transient {
        Transient {
            peak_before: PEAK.load(Ordering::Relaxed),
        }
    }
}

impl Drop for Transient {
    fn drop(&mut self) {
        PEAK.store(self.peak_before.max(current()), Ordering::Relaxed);
    }
}
