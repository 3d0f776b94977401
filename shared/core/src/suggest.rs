//! "did you mean …": the nearest known name to a misspelt one, for the messages that
//! refuse an unknown state, event or keyword.

/// The candidate nearest `word` by edit distance, when one is close enough to be a
/// slip of the keyboard: one edit for names of up to three characters, two beyond, and
/// never more than a third of the longer name (`A` is not a typo of `B`). Ties go to the
/// first candidate; `word` itself is never suggested.
pub(crate) fn nearest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .into_iter()
        .filter(|c| *c != word)
        .map(|c| (edit_distance(word, c), c))
        .filter(|(d, c)| {
            let longer = word.chars().count().max(c.chars().count());
            let budget = if longer <= 3 { 1 } else { 2 };
            *d <= budget && *d * 3 <= longer
        })
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// The edit distance over characters, a swap of two neighbours counting as one edit
/// (the optimal-string-alignment distance): `Piad` is one slip from `Paid`.
pub(crate) fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    // rows i-1 and i-2 of the table, for the swap
    let mut before: Vec<usize> = Vec::new();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for i in 0..a.len() {
        let mut cur = vec![i + 1; b.len() + 1];
        for j in 0..b.len() {
            cur[j + 1] = (prev[j] + usize::from(a[i] != b[j]))
                .min(prev[j + 1] + 1)
                .min(cur[j] + 1);
            if i > 0 && j > 0 && a[i] == b[j - 1] && a[i - 1] == b[j] {
                cur[j + 1] = cur[j + 1].min(before[j - 1] + 1);
            }
        }
        before = std::mem::replace(&mut prev, cur);
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slip_is_matched_and_a_different_name_is_not() {
        let states = ["Waiting", "Greeted", "Done"];
        assert_eq!(nearest("Greted", states), Some("Greeted"));
        assert_eq!(nearest("Waitng", states), Some("Waiting"));
        assert_eq!(nearest("Dne", states), Some("Done"));
        assert_eq!(nearest("Elsewhere", states), None);
        assert_eq!(nearest("B", ["A"]), None);
        assert_eq!(nearest("Done", states), None);
        assert_eq!(nearest("Piad", ["Cart", "Paid"]), Some("Paid"));
        assert_eq!(edit_distance("Crat", "Cart"), 1);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
