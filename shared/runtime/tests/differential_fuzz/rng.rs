//! The random source (the kit's seeded generator), and the seed of each case of a run.

pub(crate) use stm_testkit::Rng;

/// The seed of case `index` of a run seeded `seed` (cases are independent of the count).
pub(crate) fn case_seed(seed: u64, index: usize) -> u64 {
    let mut r = Rng::new(seed ^ (index as u64).wrapping_mul(0xd134_2543_de82_ef95));
    r.next()
}
