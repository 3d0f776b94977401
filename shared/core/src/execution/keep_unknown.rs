//! `Deserialize` for the records that keep the fields they do not know (`extra`).
//!
//! `#[serde(flatten)]` would do it, but serde buffers every field of a flattened struct
//! as untyped content first, and with serde_json's `arbitrary_precision` an untyped
//! float is a private one-entry map that a typed `f64` then refuses: every record with a
//! timestamp took the slow path through a `Value`. This reads each known field typed,
//! straight from the parser, and only the unknown ones as `Value`s. As serde's derive
//! does, a key is matched to its field while the parser lends it, so a known key costs
//! no allocation.

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
                /// A key: one of the record's fields, or one it does not know.
                #[allow(non_camel_case_types)]
                enum Field {
                    $($req,)*
                    $($opt,)*
                    Unknown(String),
                }
                struct FieldVisitor;
                impl<'de> serde::de::Visitor<'de> for FieldVisitor {
                    type Value = Field;
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        f.write_str("a field name")
                    }
                    fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<Field, E> {
                        Ok(match key {
                            $(stringify!($req) => Field::$req,)*
                            $(stringify!($opt) => Field::$opt,)*
                            _ => Field::Unknown(key.to_owned()),
                        })
                    }
                }
                impl<'de> serde::Deserialize<'de> for Field {
                    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                        deserializer.deserialize_identifier(FieldVisitor)
                    }
                }
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
                        while let Some(field) = map.next_key::<Field>()? {
                            match field {
                                $(Field::$req => $req = Some(map.next_value()?),)*
                                $(Field::$opt => $opt = Some(map.next_value()?),)*
                                Field::Unknown(key) => {
                                    let value = map.next_value::<$crate::Value>()?;
                                    $extra.insert(key, value);
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
