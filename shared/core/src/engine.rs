//! The pure engine (being written).
