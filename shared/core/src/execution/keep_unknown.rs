//! `Deserialize` for the records that keep the fields they do not know (`extra`).
//!
//! `#[serde(flatten)]` would do it, but serde buffers every field of a flattened struct
//! as untyped content first, and with serde_json's `arbitrary_precision` an untyped
//! float is a private one-entry map that a typed `f64` then refuses: every record with a
//! timestamp took the slow path through a `Value`. This reads each known field typed,
//! straight from the parser, and only the unknown ones as `Value`s.

/// `impl Deserialize` for `$record`: the `required` fields must be present, each
/// `defaulted` one takes its expression when absent, and every other key goes to
/// `$extra` in the order read. A repeated key keeps its last value, as pydantic does.
macro_rules! deserialize_keeping_unknown {
    (
        $record:ident,
        required { $($req:ident : $req_ty:ty),* $(,)? },
        defaulted { $($opt:ident : $opt_ty:ty = $default:expr),* $(,)? },
        unknown: $extra:ident $(,)?
    ) => {
        impl<'de> serde::Deserialize<'de> for $record {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct RecordVisitor;
                impl<'de> serde::de::Visitor<'de> for RecordVisitor {
                    type Value = $record;
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        f.write_str(concat!("a JSON object (", stringify!($record), ")"))
                    }
                    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<$record, A::Error> {
                        $(let mut $req: Option<$req_ty> = None;)*
                        $(let mut $opt: Option<$opt_ty> = None;)*
                        let mut $extra = $crate::Map::new();
                        while let Some($crate::execution::keep_unknown::RecordKey(key)) = map.next_key()? {
                            match key.as_ref() {
                                $(stringify!($req) => $req = Some(map.next_value()?),)*
                                $(stringify!($opt) => $opt = Some(map.next_value()?),)*
                                _ => {
                                    let value = map.next_value::<$crate::Value>()?;
                                    $extra.insert(key.into_owned(), value);
                                }
                            }
                        }
                        Ok($record {
                            $($req: $req.ok_or_else(|| serde::de::Error::missing_field(stringify!($req)))?,)*
                            $($opt: $opt.unwrap_or_else(|| $default),)*
                            $extra,
                        })
                    }
                }
                deserializer.deserialize_map(RecordVisitor)
            }
        }
    };
}

pub(crate) use deserialize_keeping_unknown;

/// A record's key, borrowed from the input when the parser can lend it: a known key
/// then costs no allocation.
pub(crate) struct RecordKey<'de>(pub(crate) std::borrow::Cow<'de, str>);

impl<'de> serde::Deserialize<'de> for RecordKey<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> serde::de::Visitor<'de> for KeyVisitor {
            type Value = RecordKey<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a field name")
            }
            fn visit_borrowed_str<E: serde::de::Error>(self, key: &'de str) -> Result<Self::Value, E> {
                Ok(RecordKey(std::borrow::Cow::Borrowed(key)))
            }
            fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<Self::Value, E> {
                Ok(RecordKey(std::borrow::Cow::Owned(key.to_owned())))
            }
            fn visit_string<E: serde::de::Error>(self, key: String) -> Result<Self::Value, E> {
                Ok(RecordKey(std::borrow::Cow::Owned(key)))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}
