//! Imports, bindings, named guards and fragment expansion: harel's `dsl/loader.py`.
//!
//! * `import "lib.stm" [as ns]` parses the file (relative to the importing one) and
//!   merges its events, bindings, guards and fragments (the fragments prefixed `ns.`)
//!   into one registry; the importing file's own declarations win. A file imported
//!   twice is loaded once (harel's shared `seen` set), and the machines of imported
//!   files are built and registered as submachines (keyed `ns.Machine`), so an
//!   `invoke ns.Machine` resolves without an external resolver.
//! * Every bare action handler is bound through `bind`; every `where <guard>` is
//!   replaced by the named guard's predicate; `use F(...)` instantiates a fragment as
//!   a child state, its parameters (action / state / guard / value / event) filled in
//!   the instance's own scope, nested uses forwarding their enclosing fragment's
//!   parameters by name.
//! * Unbound handlers / guards / value parameters are collected over the whole
//!   machine and reported together, at the machine declaration.

mod expand;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Component, Path, PathBuf};
use std::rc::Rc;

use indexmap::IndexMap;

use super::builder::{build_definition, BuildError};
use super::error::DslError;
use super::program::{build_program, py_repr, FileId, PredCfg, Program, SrcPos, StateCfg};
use crate::definition::{Definition, EventType};
use crate::Value;

/// One source text the loader knows.
struct SourceFile {
    /// The name errors and `Definition::source_file` use (`None`: an anonymous text).
    display: Option<String>,
    text: String,
    /// The directory its imports resolve against (`None`: the working directory).
    dir: Option<PathBuf>,
    /// Its canonical path, for the import cycle check.
    canon: Option<PathBuf>,
}

/// A file's merged registry (its imports' declarations, then its own).
#[derive(Default)]
struct Registry {
    events: IndexMap<String, EventType>,
    fragments: IndexMap<String, Box<StateCfg>>,
    bindings: IndexMap<String, String>,
    guards: IndexMap<String, PredCfg>,
}

/// The resolution scope of harel's `_Ctx`.
#[derive(Clone, Default)]
struct Ctx {
    bindings: HashMap<String, String>,
    guards: HashMap<String, PredCfg>,
    values: HashMap<String, Value>,
    /// state-param name -> resolved target (for nested forwarding)
    states: HashMap<String, String>,
    /// event-param name -> resolved kind
    events: HashMap<String, String>,
    /// the file this scope's nodes come from
    source: FileId,
}

/// What the expansion of one machine collects.
#[derive(Default)]
struct Acc {
    unbound: BTreeSet<String>,
    unbound_g: BTreeSet<String>,
    unbound_v: BTreeSet<String>,
    /// fragments being instantiated (recursion guard)
    using: Vec<String>,
    /// the current state nesting
    depth: usize,
}

/// How deep states may nest once fragments are expanded (the parser bounds the
/// nesting of one file; fragments using fragments multiply it).
const MAX_STATE_DEPTH: usize = 200;

// Fragment expansion, the other half of its methods, is in `expand`.
pub(crate) struct Loader {
    files: Vec<SourceFile>,
    by_path: HashMap<PathBuf, FileId>,
    programs: HashMap<FileId, Rc<Program>>,
}

type LResult<T> = Result<T, DslError>;

impl Loader {
    pub fn new() -> Self {
        Loader {
            files: Vec::new(),
            by_path: HashMap::new(),
            programs: HashMap::new(),
        }
    }

    /// Register the file at `path`, reading it.
    pub fn add_file(&mut self, path: &Path) -> LResult<FileId> {
        let canon = absolute(path);
        if let Some(&id) = self.by_path.get(&canon) {
            return Ok(id);
        }
        let display = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| DslError::new(format!("cannot read {display}: {e}")).with_file(display.clone()))?;
        Ok(self.push(SourceFile {
            display: Some(display),
            text,
            dir: Some(path.parent().map(Path::to_path_buf).unwrap_or_default()),
            canon: Some(canon),
        }))
    }

    /// Register a text; `origin` is the file it came from (imports resolve next to it).
    pub fn add_text(&mut self, text: &str, origin: Option<&Path>) -> FileId {
        self.push(SourceFile {
            display: origin.map(|p| p.display().to_string()),
            text: text.to_string(),
            dir: origin.map(|p| p.parent().map(Path::to_path_buf).unwrap_or_default()),
            canon: origin.map(absolute),
        })
    }

    fn push(&mut self, f: SourceFile) -> FileId {
        let id = self.files.len();
        if let Some(c) = &f.canon {
            self.by_path.entry(c.clone()).or_insert(id);
        }
        self.files.push(f);
        id
    }

    /// An error at `pos`, with its file and source line.
    fn error_at(&self, message: impl Into<String>, pos: SrcPos) -> DslError {
        let f = &self.files[pos.file];
        let mut e = DslError::at(message, &f.text, pos.line, pos.col);
        e.file = f.display.clone();
        e
    }

    fn error_in(&self, message: impl Into<String>, file: FileId) -> DslError {
        let mut e = DslError::new(message);
        e.file = self.files[file].display.clone();
        e
    }

    /// The parsed program of `file` (cached).
    pub fn program(&mut self, file: FileId) -> LResult<Rc<Program>> {
        if let Some(p) = self.programs.get(&file) {
            return Ok(p.clone());
        }
        let prog = build_program(&self.files[file].text, file).map_err(|mut e| {
            e.file = self.files[file].display.clone();
            e
        })?;
        let prog = Rc::new(prog);
        self.programs.insert(file, prog.clone());
        Ok(prog)
    }

    /// Where an import of `file` points: (as joined, absolute).
    fn import_path(&self, file: FileId, path: &str) -> (PathBuf, PathBuf) {
        let joined = match &self.files[file].dir {
            Some(dir) => dir.join(path),
            None => PathBuf::from(path),
        };
        let abs = absolute(&joined);
        (joined, abs)
    }

    /// harel's `_load_program`: parse `file` and pull its imports in, recursively.
    fn load_registry(
        &mut self,
        file: FileId,
        stack: &mut Vec<(PathBuf, String)>,
        seen: &mut HashSet<PathBuf>,
    ) -> LResult<Registry> {
        let prog = self.program(file)?;
        let mut reg = Registry::default();
        let me = self.files[file]
            .canon
            .clone()
            .map(|c| (c, self.files[file].display.clone().unwrap_or_default()));
        if let Some(me) = &me {
            stack.push(me.clone());
        }
        for imp in &prog.imports {
            let pos = SrcPos {
                file,
                line: imp.line,
                col: imp.column,
            };
            let (joined, abs) = self.import_path(file, &imp.path);
            if let Some(i) = stack.iter().position(|(p, _)| *p == abs) {
                let mut chain: Vec<String> = stack[i..].iter().map(|(_, d)| d.clone()).collect();
                chain.push(joined.display().to_string());
                return Err(self
                    .error_at(format!("import cycle: {}", chain.join(" -> ")), pos)
                    .with_hint("a file cannot import itself, directly or through the files it imports"));
            }
            if !seen.insert(abs.clone()) {
                continue;
            }
            if !abs.is_file() {
                return Err(self
                    .error_at(format!("import not found: {}", imp.path), pos)
                    .with_hint(format!(
                        "imports resolve relative to the importing file: looked for {}",
                        joined.display()
                    )));
            }
            let ifile = self
                .add_file(&joined)
                .map_err(|e| self.error_at(e.message, pos))?;
            let sub = self.load_registry(ifile, stack, seen)?;
            reg.events.extend(sub.events);
            reg.bindings.extend(sub.bindings);
            reg.guards.extend(sub.guards);
            for (name, cfg) in sub.fragments {
                let key = match &imp.alias {
                    Some(alias) => format!("{alias}.{name}"),
                    None => name,
                };
                reg.fragments.insert(key, cfg);
            }
        }
        reg.events
            .extend(prog.event_types.iter().map(|(k, v)| (k.clone(), v.clone())));
        reg.bindings
            .extend(prog.bindings.iter().map(|(k, v)| (k.clone(), v.clone())));
        reg.guards
            .extend(prog.guard_cfgs.iter().map(|(k, v)| (k.clone(), v.clone())));
        for (name, cfg) in &prog.fragment_cfgs {
            let mut cfg = cfg.clone();
            cfg.src.get_or_insert(file);
            reg.fragments.insert(name.clone(), cfg);
        }
        if me.is_some() {
            stack.pop();
        }
        Ok(reg)
    }

    /// Every machine of `file` (for [`load_all_file`](super::load_all_file)).
    pub fn all_definitions(&mut self, file: FileId) -> LResult<Vec<Definition>> {
        let reg = self.load_registry(file, &mut Vec::new(), &mut HashSet::new())?;
        let prog = self.program(file)?;
        let imported = self.imported_machines(file, &mut HashSet::new());
        let mut out = Vec::new();
        for name in &prog.machines {
            let mut defn = self.build_machine(file, &prog, &reg, name)?;
            for (fqn, sub) in &imported {
                defn.submachines.entry(fqn.clone()).or_insert_with(|| sub.clone());
            }
            out.push(defn);
        }
        Ok(out)
    }

    /// harel's `definition_from_dsl`: the machine `name` of `file` (the only one when
    /// `None`), with the machines of imported files registered as submachines when
    /// `register_imports`.
    pub fn definition(
        &mut self,
        file: FileId,
        name: Option<&str>,
        register_imports: bool,
    ) -> LResult<Definition> {
        let reg = self.load_registry(file, &mut Vec::new(), &mut HashSet::new())?;
        let prog = self.program(file)?;
        if prog.machines.is_empty() {
            return Err(self.error_in("no machine declared", file));
        }
        let name = match name {
            None if prog.machines.len() > 1 => {
                return Err(self
                    .error_in(
                        format!(
                            "multiple machines ({}); pass a machine name",
                            prog.machines.join(", ")
                        ),
                        file,
                    )
                    .with_hint(format!("name the machine to load, e.g. `{}`", prog.machines[0])))
            }
            None => prog.machines[0].clone(),
            Some(n) if !prog.machine_cfgs.contains_key(n) => {
                return Err(self
                    .error_in(format!("no machine named {}", py_repr(n)), file)
                    .with_hint(format!("the file declares: {}", prog.machines.join(", "))))
            }
            Some(n) => n.to_string(),
        };
        let mut defn = self.build_machine(file, &prog, &reg, &name)?;
        if register_imports {
            for (fqn, sub) in self.imported_machines(file, &mut HashSet::new()) {
                defn.submachines.entry(fqn).or_insert(sub);
            }
        }
        Ok(defn)
    }

    /// Expand the machine `name`, check its references and build it.
    fn build_machine(&self, file: FileId, prog: &Program, reg: &Registry, name: &str) -> LResult<Definition> {
        let machine = prog.machine_cfgs[name].clone();
        let machine_pos = machine.pos;
        let ctx = Ctx {
            bindings: reg.bindings.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            guards: reg.guards.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            source: file,
            ..Ctx::default()
        };
        let mut acc = Acc::default();
        let cfg = self.expand(machine, &reg.fragments, &ctx, &mut acc)?;
        let at_machine = |msg: String, hint: &str| {
            let e = match machine_pos {
                Some(pos) => self.error_at(msg, pos),
                None => self.error_in(msg, file),
            };
            e.with_hint(hint.to_string())
        };
        if !acc.unbound.is_empty() {
            let names: Vec<&str> = acc.unbound.iter().map(String::as_str).collect();
            return Err(at_machine(
                format!("unbound action handlers: {} (add a `bind`)", names.join(", ")),
                &format!(
                    "bind each handler to a function: `bind {{ {} = pkg.module.fn }}`",
                    names[0]
                ),
            ));
        }
        if !acc.unbound_g.is_empty() {
            let names: Vec<&str> = acc.unbound_g.iter().map(String::as_str).collect();
            return Err(at_machine(
                format!(
                    "unbound guards: {} (add a `guard` decl or a use arg)",
                    names.join(", ")
                ),
                &format!("declare it: `guard {} = <condition>`", names[0]),
            ));
        }
        if !acc.unbound_v.is_empty() {
            let names: Vec<&str> = acc.unbound_v.iter().map(String::as_str).collect();
            return Err(at_machine(
                format!("unbound value params: {} (only valid inside a fragment)", names.join(", ")),
                "a bare name as an action input or a timeout is a `value` parameter of the enclosing fragment",
            ));
        }
        let mut defn = build_definition(&cfg, name, name).map_err(|e| self.build_error(e))?;
        defn.events = reg.events.clone();
        defn.source_file = self.files[file].display.clone();
        set_source_file(&mut defn, self.files[file].display.as_deref());
        Ok(defn)
    }

    fn build_error(&self, e: BuildError) -> DslError {
        let error = match e.pos {
            Some(pos) => self.error_at(e.message, pos),
            None => DslError::new(e.message),
        };
        match e.hint {
            Some(hint) => error.with_hint(hint),
            None => error,
        }
    }

    /// harel's `_imported_machines`: every machine of each imported file (transitively),
    /// built and keyed by its alias-scoped name. A file or machine that fails is skipped.
    fn imported_machines(
        &mut self,
        file: FileId,
        seen: &mut HashSet<PathBuf>,
    ) -> IndexMap<String, Definition> {
        let mut out = IndexMap::new();
        let Ok(prog) = self.program(file) else { return out };
        for imp in &prog.imports {
            let (joined, abs) = self.import_path(file, &imp.path);
            if seen.contains(&abs) || !abs.is_file() {
                continue;
            }
            seen.insert(abs);
            let Ok(ifile) = self.add_file(&joined) else {
                continue;
            };
            let Ok(iprog) = self.program(ifile) else { continue };
            for mname in &iprog.machines {
                let fqn = match &imp.alias {
                    Some(alias) => format!("{alias}.{mname}"),
                    None => mname.clone(),
                };
                let Ok(mut sub) = self.definition(ifile, Some(mname), false) else {
                    continue;
                };
                sub.id = fqn.clone();
                let nested: Vec<(String, Definition)> = sub
                    .submachines
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                out.insert(fqn, sub);
                out.extend(nested);
            }
            for (tfqn, tsub) in self.imported_machines(ifile, seen) {
                let key = match &imp.alias {
                    Some(alias) => format!("{alias}.{tfqn}"),
                    None => tfqn,
                };
                out.entry(key).or_insert(tsub);
            }
        }
        out
    }
}

fn set_source_file(defn: &mut Definition, file: Option<&str>) {
    for sub in defn.submachines.values_mut() {
        sub.source_file = file.map(str::to_string);
        set_source_file(sub, file);
    }
}

/// `path` made absolute: canonical when it exists, else normalized lexically.
fn absolute(path: &Path) -> PathBuf {
    if let Ok(c) = std::fs::canonicalize(path) {
        return c;
    }
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|d| d.join(path))
            .unwrap_or_else(|_| path.to_path_buf())
    };
    let mut out = PathBuf::new();
    for c in joined.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}
