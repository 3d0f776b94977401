//! Execution ids as SQS FIFO message group ids.
//!
//! Every message for an execution is sent with `MessageGroupId` = its id, and SQS takes a
//! group id (and a `MessageDeduplicationId`) of 1 to 128 characters, each a letter, a
//! digit or ASCII punctuation (``!"#$%&'()*+,-./:;<=>?@[\]^_`{|}~``). An execution whose
//! id breaks that rule can never receive an event on AWS, so the rule is checked here,
//! once, for every id we accept (`create`) and every id we derive (children), and by the
//! queues before they send. Pure string checks: no AWS in this crate.
//!
//! Derived child ids follow harel's format `{parent}:{path}:{seq}[:{i}]` whenever that
//! fits the rule. It does not always: the id grows with every nesting level and carries
//! the state path's characters (a non-ASCII state name), so harel's own id for a deep or
//! non-ASCII child would be refused by SQS and the child could never start there. Only
//! then [`child_id`] gives a bounded form instead: the longest leading run of allowed
//! characters of harel's id (at most [`BOUNDED_PREFIX_MAX`]), `~`, and 16 hex digits of
//! the FNV-1a 64 hash of harel's full id. That form is a deliberate departure from harel,
//! limited to ids harel itself could not deliver on AWS; it is deterministic across
//! processes and versions (FNV-1a is fixed and implemented here), because the same child
//! must get the same id on every redelivery and every replay of its parent's step.

/// SQS's limit on a message group id and a deduplication id, in characters.
pub const MAX_GROUP_ID_LEN: usize = 128;

/// The hex digits of the bounded form's hash suffix.
const HASH_HEX: usize = 16;

/// The longest readable prefix a bounded child id keeps: room for `~` and the hash.
pub const BOUNDED_PREFIX_MAX: usize = MAX_GROUP_ID_LEN - 1 - HASH_HEX;

/// The rule, as the error messages state it.
pub const GROUP_ID_RULE: &str = "use 1-128 characters, letters, digits and ASCII punctuation \
     (!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~)";

/// Whether `c` may appear in an SQS message group id: exactly SQS's alphabet, which is
/// ASCII alphanumerics plus ASCII punctuation (no space, no control, nothing non-ASCII).
pub fn is_group_id_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c.is_ascii_punctuation()
}

/// Whether `id` is a valid SQS message group id (and deduplication id).
pub fn valid_group_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= MAX_GROUP_ID_LEN && id.chars().all(is_group_id_char)
}

/// What is wrong with an id as an SQS message group id, in a few words when shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum GroupIdProblem {
    Empty,
    /// The 1-based position of the first character SQS refuses, and that character.
    Character {
        position: usize,
        found: char,
    },
    /// All ASCII, but longer than SQS takes.
    TooLong {
        chars: usize,
    },
}

impl std::fmt::Display for GroupIdProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            GroupIdProblem::Empty => f.write_str("it is empty"),
            GroupIdProblem::Character { position, found: ' ' } => {
                write!(f, "character {position} is a space")
            }
            GroupIdProblem::Character { position, found } if found.is_control() => {
                write!(f, "character {position} is the control character {found:?}")
            }
            GroupIdProblem::Character { position, found } => write!(f, "character {position} is {found:?}"),
            GroupIdProblem::TooLong { chars } => write!(f, "it is {chars} characters long"),
        }
    }
}

/// What is wrong with `id` as an SQS message group id (`None`: nothing).
pub fn group_id_problem(id: &str) -> Option<GroupIdProblem> {
    if id.is_empty() {
        return Some(GroupIdProblem::Empty);
    }
    if let Some((at, found)) = id.chars().enumerate().find(|(_, c)| !is_group_id_char(*c)) {
        return Some(GroupIdProblem::Character {
            position: at + 1,
            found,
        });
    }
    // all ASCII from here: bytes are characters
    if id.len() > MAX_GROUP_ID_LEN {
        return Some(GroupIdProblem::TooLong { chars: id.len() });
    }
    None
}

/// An execution id SQS would refuse as a message group id (the execution's group is its
/// id): such an execution could never receive an event. A long id is shown cut, with its
/// length, so the message stays readable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("execution id {} is not a valid SQS message group id: {problem}; {GROUP_ID_RULE}", shown(.id))]
pub struct InvalidExecutionId {
    pub id: String,
    pub problem: GroupIdProblem,
}

/// Refuse an execution id SQS would refuse as a group id.
pub fn check_execution_id(id: &str) -> Result<(), InvalidExecutionId> {
    match group_id_problem(id) {
        Some(problem) => Err(InvalidExecutionId {
            id: id.to_string(),
            problem,
        }),
        None => Ok(()),
    }
}

/// `id` quoted, cut to 80 characters.
fn shown(id: &str) -> String {
    const SHOWN: usize = 80;
    let count = id.chars().count();
    if count <= SHOWN {
        return format!("{id:?}");
    }
    let cut: String = id.chars().take(SHOWN).collect();
    format!("{cut:?}... ({count} characters)")
}

/// FNV-1a, 64 bits: tiny, dependency-free and fixed forever, which is what a derived id
/// needs (the same input must hash the same in every process and every release).
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    bytes
        .iter()
        .fold(OFFSET, |hash, b| (hash ^ u64::from(*b)).wrapping_mul(PRIME))
}

/// The id of a derived child, from harel's form of it (`{parent}:{path}:{seq}[:{i}]`):
/// harel's id itself when it is a valid group id, else the bounded form (see the module
/// docs). The bounded prefix is a true prefix of harel's id, never an altered one, so a
/// prefix test that holds for a bounded id also holds for harel's.
pub fn child_id(harel_form: String) -> String {
    if valid_group_id(&harel_form) {
        return harel_form;
    }
    let readable = harel_form
        .char_indices()
        .find(|(_, c)| !is_group_id_char(*c))
        .map_or(harel_form.len(), |(at, _)| at);
    // the readable run is ASCII: any byte index in it is a char boundary
    let prefix = &harel_form[..readable.min(BOUNDED_PREFIX_MAX)];
    format!("{prefix}~{:016x}", fnv1a64(harel_form.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use stm_testkit::Rng;

    #[test]
    fn the_rule_is_sqs_alphabet_and_length() {
        assert!(valid_group_id("exe"));
        assert!(valid_group_id("a:Main.B:0:3"));
        assert!(valid_group_id("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"));
        assert!(valid_group_id(&"x".repeat(128)));
        assert!(!valid_group_id(&"x".repeat(129)));
        assert!(!valid_group_id(""));
        assert!(!valid_group_id("a b"));
        assert!(!valid_group_id("tab\there"));
        assert!(!valid_group_id("Größe"));
        let said = |id: &str| group_id_problem(id).map(|p| p.to_string());
        assert_eq!(said("a b").as_deref(), Some("character 2 is a space"));
        assert_eq!(
            said("tab\there").as_deref(),
            Some("character 4 is the control character '\\t'")
        );
        assert_eq!(said("").as_deref(), Some("it is empty"));
        assert_eq!(
            said(&"x".repeat(129)).as_deref(),
            Some("it is 129 characters long")
        );
        assert_eq!(said("é").as_deref(), Some("character 1 is 'é'"));
    }

    #[test]
    fn the_error_names_the_id_and_the_rule() {
        let text = check_execution_id("a b").expect_err("a space").to_string();
        assert_eq!(
            text,
            "execution id \"a b\" is not a valid SQS message group id: character 2 is a space; \
             use 1-128 characters, letters, digits and ASCII punctuation \
             (!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~)"
        );
        let long = check_execution_id(&"y".repeat(300))
            .expect_err("too long")
            .to_string();
        assert!(
            long.contains("(300 characters)") && long.contains("300 characters long"),
            "{long}"
        );
        assert!(long.len() < 400, "{long}");
        assert_eq!(check_execution_id("fine"), Ok(()));
    }

    #[test]
    fn fnv1a64_is_the_published_function() {
        // the reference vectors of the FNV specification
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn ids_that_fit_keep_harel_format() {
        for id in [
            "exe:Main.Work.Billing:0",
            "p:Notify:2:17",
            &format!("{}:A:0", "r".repeat(124)),
        ] {
            assert_eq!(child_id(id.to_string()), id);
        }
    }

    #[test]
    fn ids_that_do_not_fit_are_bounded_and_stable() {
        let long = format!("{}:Main.Deep.Region:0", "p".repeat(120));
        let bounded = child_id(long.clone());
        assert!(valid_group_id(&bounded), "{bounded}");
        assert_eq!(bounded.len(), MAX_GROUP_ID_LEN);
        assert_eq!(&bounded[..BOUNDED_PREFIX_MAX], &long[..BOUNDED_PREFIX_MAX]);
        assert_eq!(bounded, child_id(long.clone()), "deterministic");
        // pinned: a change here changes every bounded id already stored
        assert_eq!(
            child_id("exe:Main.Größe:0".to_string()),
            format!("exe:Main.Gr~{:016x}", fnv1a64("exe:Main.Größe:0".as_bytes()))
        );
        assert_eq!(
            child_id("exe:Main.Größe:0".to_string()),
            "exe:Main.Gr~9cd55a8ed7ce7c93"
        );
        // a leading non-ASCII character leaves only the hash
        let bare = child_id("é".to_string());
        assert!(
            bare.starts_with('~') && bare.len() == 17 && valid_group_id(&bare),
            "{bare}"
        );
    }

    /// Up to `max` characters from a pool of separators, escapes and non-ASCII letters.
    fn text(rng: &mut Rng, max: usize) -> String {
        const POOL: &[char] = &[
            'a', 'Z', '0', '9', ':', '.', '-', '_', '~', '!', ' ', 'é', 'ß', '日', '\t', '"', '\\',
        ];
        (0..rng.index(max + 1)).map(|_| *rng.pick(POOL)).collect()
    }

    #[test]
    fn derived_ids_always_obey_the_rule() {
        let mut rng = Rng::new(0x9e37_79b9_7f4a_7c15);
        for _ in 0..20_000 {
            let mut parent = text(&mut rng, 160);
            if parent.is_empty() {
                parent.push('p');
            }
            let path = text(&mut rng, 60);
            let harel = if rng.index(2) == 0 {
                format!("{parent}:{path}:{}", rng.index(5))
            } else {
                format!("{parent}:{path}:{}:{}", rng.index(5), rng.index(300))
            };
            let id = child_id(harel.clone());
            assert!(valid_group_id(&id), "{harel:?} -> {id:?}");
            if valid_group_id(&harel) {
                assert_eq!(id, harel, "an id that fits keeps harel's format");
            } else {
                let (prefix, hash) = id.rsplit_once('~').unwrap_or_default();
                assert!(harel.starts_with(prefix), "{harel:?} -> {id:?}");
                assert_eq!(hash, format!("{:016x}", fnv1a64(harel.as_bytes())));
            }
            // nesting: a child of the derived id is derived again, and still fits
            let grandchild = child_id(format!("{id}:{path}.Inner:0"));
            assert!(valid_group_id(&grandchild), "{grandchild:?}");
        }
    }
}
