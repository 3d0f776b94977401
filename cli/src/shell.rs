//! Words the CLI prints for a user to paste into a shell (the export line, next steps).

/// `value` as one shell word: as it is when it needs no quoting, else in single quotes.
pub fn shell_word(value: &str) -> String {
    let plain = !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:@%+=,".contains(c));
    if plain {
        value.to_string()
    } else {
        format!("'{}'", value.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::shell_word;

    #[test]
    fn words_are_shell_safe() {
        assert_eq!(shell_word("/tmp/examples"), "/tmp/examples");
        assert_eq!(shell_word("/tmp/my machines"), "'/tmp/my machines'");
        assert_eq!(shell_word("it's"), r"'it'\''s'");
        assert_eq!(shell_word(""), "''");
    }
}
