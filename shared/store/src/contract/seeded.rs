//! The one seeded random source of the randomized tests, the store's contract and the
//! model's random walks, with the seed helpers around it: a shape, a fault schedule or a
//! walk is drawn the same way wherever it is drawn, and any failure replays from the seed it
//! prints ([`SeedOnFailure`]).
//!
//! One file, compiled twice: here, as `stm_store::contract::Rng` for the contract's drawn
//! shapes, and by `stm-testkit` (`#[path]` to this file) as `stm_testkit::Rng` for every
//! other test. The store is a published crate, and a published crate's code cannot depend
//! on the unpublished kit (packaging wants every normal dependency on the registry); the
//! kit cannot depend on the store (every crate's tests use it, the store's own included).

/// xorshift64*: tiny, no dependencies, the same sequence for a seed on every platform.
/// Good enough to pick shapes, faults and values; not for anything secret.
///
/// ```
/// use stm_testkit::Rng;
///
/// let (mut a, mut b) = (Rng::new(42), Rng::new(42));
/// let draws: Vec<u64> = (0..4).map(|_| a.next()).collect();
/// assert_eq!(draws, (0..4).map(|_| b.next()).collect::<Vec<_>>(), "a seed is one sequence");
/// assert_ne!(Rng::new(43).next(), Rng::new(42).next());
/// assert!((0..1000).all(|_| a.below(6) < 6 && (3..=5).contains(&a.between(3, 5))));
/// assert!((0..1000).all(|_| (1..=300).contains(&a.spread(300))));
/// let mut xs = [1, 2, 3, 4, 5];
/// a.shuffle(&mut xs);
/// assert_eq!({ let mut s = xs; s.sort(); s }, [1, 2, 3, 4, 5], "the same items");
/// ```
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`. Zero, the one state xorshift never leaves, is
    /// taken as 1.
    pub fn new(seed: u64) -> Self {
        Rng(seed.max(1))
    }

    /// A second generator drawn from this one's state xored with `salt`, without moving
    /// this one: two schedules of one run that must not mirror each other.
    pub fn fork(&self, salt: u64) -> Rng {
        Rng::new(self.0 ^ salt)
    }

    /// A fresh 64-bit draw.
    // the suites' name for a draw; an endless `Iterator` would only add noise
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n` (0 when `n` is 0, without a draw).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }

    /// A position in `0..len` (0 when `len` is 0): [`below`](Self::below) for lengths and
    /// counts.
    pub fn index(&mut self, len: usize) -> usize {
        // a usize fits in a u64 on every target the workspace builds for
        self.below(len as u64) as usize
    }

    /// `true` `percent` times in a hundred.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// A number in `lo..=hi`, evenly (`lo` when `hi < lo`).
    pub fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi.saturating_sub(lo) + 1)
    }

    /// A number in `1..=max`, drawn evenly over its number of binary digits: as often
    /// below 10 as between 10 and 100, so a drawn size is as often tiny as large (a shape's
    /// small cases, a page of one row or a context of a few bytes, are not left to chance).
    pub fn spread(&mut self, max: u64) -> u64 {
        let digits = 64 - u64::from(max.leading_zeros());
        let top = 1u64 << self.below(digits + 1);
        (1 + self.below(top)).min(max.max(1))
    }

    /// A number in `[0, 1)`, from the draw's top 53 bits (an `f64`'s precision).
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// One of `items`, evenly.
    ///
    /// # Panics
    /// When `items` is empty.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.index(items.len())]
    }

    /// `items` in a random order (Fisher-Yates: every order as likely).
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.index(i + 1));
        }
    }
}

/// A number from the environment (decimal or `0x` hex), else `default`. A value that is set
/// but is not a number fails: a typo must not quietly run the default.
pub fn env_u64(name: &str, default: u64) -> u64 {
    let Ok(text) = std::env::var(name) else {
        return default;
    };
    let v = text.trim();
    let parsed = match v.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => v.parse().ok(),
    };
    parsed.unwrap_or_else(|| panic!("{name}={text:?} is not a number (decimal or 0x hex)"))
}

/// Says which seed a randomized test ran with if it fails (a panic unwinding past it), and
/// how to run that seed again: a shape drawn at random is only worth its failure if the
/// failure can be replayed. Hold it for the whole test.
#[derive(Debug)]
pub struct SeedOnFailure {
    test: &'static str,
    var: &'static str,
    seed: u64,
}

impl SeedOnFailure {
    pub fn new(test: &'static str, var: &'static str, seed: u64) -> Self {
        SeedOnFailure { test, var, seed }
    }
}

impl Drop for SeedOnFailure {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "{}: FAILED with seed {:#x}; run it again with {}={:#x}",
                self.test, self.seed, self.var, self.seed
            );
        }
    }
}
