//! The documents the server knows: the editor's open buffers (their unsaved text wins)
//! and, for imports, the files on disk.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use super::uri;
use lsp_types::Uri;

use super::index::FileIndex;

/// One file reached through the imports of a document, with the namespace prefix its
/// fragments and machines take there (`alias.` for `import "x.stm" as alias`).
#[derive(Debug)]
pub(crate) struct Imported {
    pub uri: Uri,
    pub prefix: String,
    pub index: FileIndex,
}

/// The open documents by URI.
#[derive(Debug, Default)]
pub(crate) struct Documents {
    open: HashMap<Uri, String>,
}

impl Documents {
    pub(crate) fn open(&mut self, uri: Uri, text: String) {
        self.open.insert(uri, text);
    }

    pub(crate) fn close(&mut self, uri: &Uri) {
        self.open.remove(uri);
    }

    /// The open documents' URIs.
    pub(crate) fn uris(&self) -> impl Iterator<Item = &Uri> {
        self.open.keys()
    }

    /// The text of `uri`: the open buffer, else the file on disk.
    pub(crate) fn text(&self, uri: &Uri) -> Option<String> {
        if let Some(text) = self.open.get(uri) {
            return Some(text.clone());
        }
        std::fs::read_to_string(uri::to_file_path(uri)?).ok()
    }

    /// The index of `uri`'s current text.
    pub(crate) fn index(&self, uri: &Uri) -> Option<FileIndex> {
        self.text(uri).map(|t| FileIndex::build(&t))
    }

    /// Every file `index` (the document at `uri`) imports, directly or through other
    /// imports, nested ones first, each once (a cycle stops at the repeated file).
    pub(crate) fn imports(&self, uri: &Uri, index: &FileIndex) -> Vec<Imported> {
        // by their text: the protocol's `Uri` caches its parts inside, which a set's key
        // should not have
        let mut seen = HashSet::from([uri.as_str().to_string()]);
        let mut out = Vec::new();
        self.collect_imports(uri, index, "", &mut seen, &mut out);
        out
    }

    fn collect_imports(
        &self,
        uri: &Uri,
        index: &FileIndex,
        prefix: &str,
        seen: &mut HashSet<String>,
        out: &mut Vec<Imported>,
    ) {
        for import in &index.imports {
            let Some(target) = resolve_import(uri, &import.path) else {
                continue;
            };
            if !seen.insert(target.as_str().to_string()) {
                continue;
            }
            let Some(imported) = self.index(&target) else {
                continue;
            };
            let prefix = match &import.alias {
                Some(alias) => format!("{prefix}{alias}."),
                None => prefix.to_string(),
            };
            self.collect_imports(&target, &imported, &prefix, seen, out);
            out.push(Imported {
                uri: target,
                prefix,
                index: imported,
            });
        }
    }
}

/// The URI of the file an import of `path` in the document `from` names (relative to
/// that document's directory), normalised so that one file has one URI.
pub(crate) fn resolve_import(from: &Uri, path: &str) -> Option<Uri> {
    let base = uri::to_file_path(from)?;
    let joined: PathBuf = base.parent()?.join(path);
    let resolved = std::fs::canonicalize(&joined).unwrap_or(joined);
    uri::from_file_path(&resolved)
}

/// The file path of `uri`, when it is a `file:` URI.
pub(crate) fn path_of(uri: &Uri) -> Option<PathBuf> {
    uri::to_file_path(uri)
}
