//! The structure rules CI holds, so that the next feature does not undo them (ARCHITECTURE.md,
//! "Structure rules"):
//! - a product source file (a crate's `src/`, test modules aside: `tests.rs` files and `tests/`
//!   folders) stays within 600 lines, but for at most five whose header (`//!` lines) says why,
//!   in a line starting "Over 600 lines:";
//! - no import circle between the files of a crate. A file's imports are the crate paths its
//!   code names (`crate::…`, `super::…`, `self::…`, and its own child modules by name; its
//!   comments and its inline test module aside); a child naming its ancestor (a module's own
//!   parent, as `use super::Partition` does) is not an import that can close a circle, since
//!   the parent holds the child.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const MAX_LINES: usize = 600;
const MAX_EXCEPTIONS: usize = 5;
const EXCEPTION: &str = "Over 600 lines:";

/// The workspace's crates, by folder.
const CRATES: &[&str] = &[
    "record-batch",
    "sasl",
    "log-core",
    "task-queue",
    "acl",
    "server",
    "cli",
    "consumer",
    "retry-topic",
    "benches",
    "test-support",
];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every `.rs` file under `dir`, test modules aside.
fn product_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if name != "tests" {
                product_files(&path, out);
            }
        } else if name.ends_with(".rs") && name != "tests.rs" {
            out.push(path);
        }
    }
}

#[test]
fn product_files_stay_within_600_lines_but_five_that_say_why() {
    let repo = repo();
    let mut over = Vec::new();
    let mut excused = Vec::new();
    for krate in CRATES {
        let mut files = Vec::new();
        product_files(&repo.join(krate).join("src"), &mut files);
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            let lines = text.lines().count();
            if lines <= MAX_LINES {
                continue;
            }
            let name = file.strip_prefix(&repo).unwrap().display().to_string();
            let says_why = text
                .lines()
                .take_while(|l| l.starts_with("//!"))
                .any(|l| l.trim_start_matches("//!").trim().starts_with(EXCEPTION));
            if says_why {
                excused.push(format!("{name} ({lines})"));
            } else {
                over.push(format!("{name} ({lines})"));
            }
        }
    }
    assert!(
        over.is_empty(),
        "product files over {MAX_LINES} lines (split them by responsibility, or say \
         \"{EXCEPTION} <why>\" in the header of at most {MAX_EXCEPTIONS}): {over:#?}"
    );
    assert!(
        excused.len() <= MAX_EXCEPTIONS,
        "more than {MAX_EXCEPTIONS} files over {MAX_LINES} lines: {excused:#?}"
    );
}

/// One crate's source files as modules: module path (`["partition", "read"]`) → file.
struct Modules {
    files: BTreeMap<Vec<String>, PathBuf>,
}

impl Modules {
    fn of(src: &Path) -> Modules {
        let mut all = Vec::new();
        product_files(src, &mut all);
        let files = all
            .into_iter()
            .filter(|f| !f.starts_with(src.join("bin")))
            .map(|f| (module_path(src, &f), f))
            .collect();
        Modules { files }
    }

    /// The file of the deepest module `path` names (the rest are items in it).
    fn resolve(&self, path: &[String]) -> Option<&Vec<String>> {
        (0..=path.len())
            .rev()
            .find_map(|n| self.files.get_key_value(&path[..n]).map(|(k, _)| k))
    }
}

/// `src/partition/read.rs` → `["partition", "read"]`; `src/partition/mod.rs` and `src/lib.rs`
/// → their folder's path.
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(src).unwrap();
    let mut parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    if !matches!(stem, "mod" | "lib" | "main") {
        parts.push(stem.to_string());
    }
    parts
}

/// The product code of `text`: without comments (doc links name paths too, but are not
/// imports) and without its inline test module (tests may import what the code may not).
fn code(text: &str) -> String {
    let product = text
        .find("\n#[cfg(test)]\nmod tests {")
        .map_or(text, |at| &text[..at]);
    product
        .lines()
        .map(|l| l.split_once("//").map_or(l, |(code, _)| code))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The module paths `text` (the file of module `me`) names: `crate::a::b`, `super::x`,
/// `self::y`, a child module `c::…`, each `{…}` group of a `use` expanded one level.
fn named_paths(text: &str, me: &[String], children: &BTreeSet<String>) -> Vec<Vec<String>> {
    let code = code(text);
    let bytes = code.as_bytes();
    let mut out = Vec::new();
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut i = 0;
    while i < bytes.len() {
        if !word(bytes[i]) || (i > 0 && (word(bytes[i - 1]) || bytes[i - 1] == b':')) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && (word(bytes[i]) || code[i..].starts_with("::")) {
            i += if bytes[i] == b':' { 2 } else { 1 };
        }
        let mut segments: Vec<&str> = code[start..i]
            .split("::")
            .filter(|s| !s.is_empty())
            .collect();
        let base: Vec<String> = match segments.first().copied() {
            Some("crate") => Vec::new(),
            Some("self") => me.to_vec(),
            Some("super") => {
                let mut base = me.to_vec();
                while segments.first() == Some(&"super") {
                    base.pop();
                    segments.remove(0);
                }
                segments.insert(0, "super");
                base
            }
            Some(first) if children.contains(first) && segments.len() > 1 => me.to_vec(),
            _ => continue,
        };
        let rest: Vec<String> = segments
            .iter()
            .skip(usize::from(matches!(
                segments.first().copied(),
                Some("crate" | "self" | "super")
            )))
            .map(|s| s.to_string())
            .collect();
        let mut path = base;
        path.extend(rest);
        // `use a::{b, c::d}`: each item of the group (one level).
        if code[i..].starts_with('{') {
            let end = code[i..].find('}').map_or(code.len(), |e| i + e);
            for item in code[i + 1..end].split(',') {
                let item: Vec<String> = item
                    .trim()
                    .split("::")
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty() && s != "self" && !s.contains(' '))
                    .collect();
                let mut full = path.clone();
                full.extend(item);
                out.push(full);
            }
        }
        out.push(path);
    }
    out
}

/// The import circles of the crate whose sources are in `src`: each as its files.
fn circles(src: &Path) -> Vec<Vec<String>> {
    let modules = Modules::of(src);
    let mut edges: BTreeMap<&Vec<String>, BTreeSet<&Vec<String>>> = BTreeMap::new();
    for (me, file) in &modules.files {
        let text = std::fs::read_to_string(file).unwrap();
        let children: BTreeSet<String> = modules
            .files
            .keys()
            .filter(|k| k.len() == me.len() + 1 && k.starts_with(me))
            .map(|k| k[me.len()].clone())
            .collect();
        let targets = edges.entry(me).or_default();
        for path in named_paths(&text, me, &children) {
            let Some(target) = modules.resolve(&path) else {
                continue;
            };
            // Naming an ancestor (or itself) closes no circle: the ancestor holds it.
            if !me.starts_with(target) {
                targets.insert(target);
            }
        }
    }
    strongly_connected(&edges)
        .into_iter()
        .filter(|c| c.len() > 1)
        .map(|c| {
            c.iter()
                .map(|m| {
                    modules.files[*m]
                        .strip_prefix(src)
                        .unwrap()
                        .display()
                        .to_string()
                })
                .collect()
        })
        .collect()
}

/// Tarjan's strongly connected components of `edges`.
fn strongly_connected<'a>(
    edges: &BTreeMap<&'a Vec<String>, BTreeSet<&'a Vec<String>>>,
) -> Vec<Vec<&'a Vec<String>>> {
    struct State<'a> {
        index: BTreeMap<&'a Vec<String>, usize>,
        low: BTreeMap<&'a Vec<String>, usize>,
        stack: Vec<&'a Vec<String>>,
        on_stack: BTreeSet<&'a Vec<String>>,
        out: Vec<Vec<&'a Vec<String>>>,
    }
    fn visit<'a>(
        v: &'a Vec<String>,
        edges: &BTreeMap<&'a Vec<String>, BTreeSet<&'a Vec<String>>>,
        s: &mut State<'a>,
    ) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in edges.get(v).into_iter().flatten() {
            if !s.index.contains_key(w) {
                visit(w, edges, s);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w);
                if w == v {
                    break;
                }
            }
            s.out.push(component);
        }
    }
    let mut s = State {
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v) {
            visit(v, edges, &mut s);
        }
    }
    s.out
}

#[test]
fn no_crate_has_an_import_circle() {
    let repo = repo();
    let found: Vec<(String, Vec<Vec<String>>)> = CRATES
        .iter()
        .map(|krate| (krate.to_string(), circles(&repo.join(krate).join("src"))))
        .filter(|(_, c)| !c.is_empty())
        .collect();
    assert!(
        found.is_empty(),
        "import circles (move what both sides need below them, or into one of them): \
         {found:#?}"
    );
}

#[test]
fn the_circle_finder_finds_a_circle_and_ignores_a_child_naming_its_parent() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir_all(src.join("a")).unwrap();
    std::fs::write(src.join("lib.rs"), "mod a;\nmod b;\n").unwrap();
    std::fs::write(src.join("a/mod.rs"), "mod c;\nuse c::Thing;\n").unwrap();
    // A child naming its parent: no circle.
    std::fs::write(src.join("a/c.rs"), "use super::Other;\n").unwrap();
    std::fs::write(
        src.join("b.rs"),
        "// use crate::a::X; in a comment is no import\n",
    )
    .unwrap();
    assert!(circles(src).is_empty(), "{:?}", circles(src));
    // a/c.rs → b.rs → a/mod.rs → a/c.rs
    std::fs::write(src.join("a/c.rs"), "use crate::b::{Y, Z};\n").unwrap();
    std::fs::write(src.join("b.rs"), "fn f() { crate::a::g() }\n").unwrap();
    let found = circles(src);
    assert_eq!(found.len(), 1, "{found:?}");
    let mut files = found[0].clone();
    files.sort();
    assert_eq!(files, ["a/c.rs", "a/mod.rs", "b.rs"]);
}
