//! The seeded random source of the randomized suites: this crate's drawn shapes and the
//! runtime's order, crash and fault suites (its `tests/common/scenarios.rs` re-exports
//! these), so a shape is drawn the same way wherever it is drawn and any failure replays
//! from the seed it prints.

/// xorshift64* (no dependencies; deterministic for a seed).
#[derive(Debug, Clone)]
pub struct Rng(pub u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.max(1))
    }
    // the suites' name for a fresh 64-bit draw; an endless Iterator would only add noise
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    /// A number in `lo..=hi`, evenly.
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
