//! Counts in output: "1 region", "2 regions", never "1 regions" or "region(s)".

/// `n` and the noun in its right number: `count(1, "file")` is `1 file`, `count(2,
/// "file")` is `2 files`.
pub fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

#[cfg(test)]
mod tests {
    use super::count;

    #[test]
    fn one_is_singular_and_every_other_count_plural() {
        assert_eq!(count(1, "region"), "1 region");
        assert_eq!(count(2, "region"), "2 regions");
        assert_eq!(count(0, "event"), "0 events");
    }
}
