//! Static checks on a [`Definition`](crate::Definition), the rules of harel 0.9.0's
//! `definition/validate.py`.
