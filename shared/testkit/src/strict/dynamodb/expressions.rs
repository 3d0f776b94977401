//! Reserved words: DynamoDB refuses an expression that uses one as a bare attribute name
//! (AWS's list, "Reserved words in DynamoDB").

use std::collections::BTreeSet;

use serde_json::Value;

use crate::strict::Refusal;

/// DynamoDB's reserved words (AWS's list, "Reserved words in DynamoDB").
const RESERVED_WORDS: &str = include_str!("../dynamodb_reserved_words.txt");

/// How many reserved words the layer knows.
pub fn reserved_word_count() -> usize {
    reserved_words().len()
}

fn reserved_words() -> &'static BTreeSet<&'static str> {
    static WORDS: std::sync::OnceLock<BTreeSet<&'static str>> = std::sync::OnceLock::new();
    WORDS.get_or_init(|| {
        RESERVED_WORDS
            .lines()
            .map(str::trim)
            .filter(|w| !w.is_empty())
            .collect()
    })
}

/// The first reserved word an expression uses as a bare attribute name.
fn reserved_word_in(expression: &str) -> Option<String> {
    const SYNTAX: [&str; 9] = [
        "AND", "OR", "NOT", "BETWEEN", "IN", "SET", "REMOVE", "ADD", "DELETE",
    ];
    let chars: Vec<char> = expression.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '#' || c == ':' {
            // a placeholder: skip its name
            i += 1;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            continue;
        }
        if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let mut j = i;
            while j < chars.len() && chars[j].is_whitespace() {
                j += 1;
            }
            let is_function = chars.get(j) == Some(&'(');
            let upper = word.to_ascii_uppercase();
            if !is_function && !SYNTAX.contains(&upper.as_str()) && reserved_words().contains(upper.as_str())
            {
                return Some(word);
            }
            continue;
        }
        if c.is_ascii_digit() {
            // a list index such as [0]
            while i < chars.len() && chars[i].is_ascii_digit() {
                i += 1;
            }
            continue;
        }
        i += 1;
    }
    None
}

const EXPRESSIONS: [&str; 5] = [
    "KeyConditionExpression",
    "FilterExpression",
    "ProjectionExpression",
    "ConditionExpression",
    "UpdateExpression",
];

pub(super) fn check_expressions(request: &Value) -> Result<(), Refusal> {
    for field in EXPRESSIONS {
        if let Some(expression) = request[field].as_str() {
            if let Some(word) = reserved_word_in(expression) {
                return Err(Refusal::dynamodb_validation(
                    "dynamodb.expression.reserved_word",
                    format!(
                        "Invalid {field}: Attribute name is a reserved keyword; reserved keyword: {word}"
                    ),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_words_are_found_as_bare_names_only() {
        assert_eq!(reserved_word_in("SET status = :s"), Some("status".into()));
        assert_eq!(reserved_word_in("SET #status = :s"), None);
        assert_eq!(
            reserved_word_in("attribute_not_exists(id) AND version = :v"),
            None
        );
        assert_eq!(reserved_word_in("attribute_not_exists(id) AND #v = :v"), None);
        assert_eq!(reserved_word_in("ADD n :k"), None);
        assert_eq!(
            reserved_word_in("size(#a) > :n AND data.items[0] = :x"),
            Some("data".into())
        );
        assert!(reserved_word_count() > 500, "{}", reserved_word_count());
    }
}
