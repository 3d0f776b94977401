//! Documents' URIs and the files they name. The protocol's `Uri` is a plain RFC 3986 URI;
//! a `file:` URI's path is percent-encoded, and these turn it into a path on disk and back.

use std::path::{Path, PathBuf};

pub(crate) use lsp_types::Uri;

/// `text` as a URI, if it is one.
pub(crate) fn parse(text: &str) -> Option<Uri> {
    text.parse().ok()
}

/// The file a `file:` URI names (an empty or `localhost` authority, an absolute path); `None`
/// for any other URI (`untitled:`, a remote host).
pub(crate) fn to_file_path(uri: &Uri) -> Option<PathBuf> {
    let rest = uri.as_str().strip_prefix("file://")?;
    let path = rest.strip_prefix("localhost").unwrap_or(rest);
    if !path.starts_with('/') {
        return None;
    }
    let path = path.split(['?', '#']).next()?;
    crate::percent::decode(path).map(PathBuf::from)
}

/// The `file:` URI of an absolute path (`None` for a relative one or one that is not UTF-8).
pub(crate) fn from_file_path(path: &Path) -> Option<Uri> {
    if !path.is_absolute() {
        return None;
    }
    let segments: Vec<String> = path.to_str()?.split('/').map(crate::percent::url_part).collect();
    parse(&format!("file://{}", segments.join("/")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_path_goes_to_its_uri_and_back() {
        let path = Path::new("/tmp/a dir/ü.stm");
        let uri = from_file_path(path).expect("an absolute path");
        assert_eq!(uri.as_str(), "file:///tmp/a%20dir/%C3%BC.stm");
        assert_eq!(to_file_path(&uri).as_deref(), Some(path));
        let local = parse("file://localhost/x/y.stm").expect("a uri");
        assert_eq!(to_file_path(&local), Some(PathBuf::from("/x/y.stm")));
        assert_eq!(to_file_path(&parse("untitled:x.stm").expect("a uri")), None);
        assert_eq!(from_file_path(Path::new("relative.stm")), None);
    }
}
