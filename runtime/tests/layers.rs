//! The runtime's layers (`docs/architecture.md`, "Layers"): each top-level module of
//! `runtime/src` may use only the modules below it in `LAYERS`, so they import each other
//! in no cycle. Cycles inside one folder are fine. Also the size rule: no source file of
//! `runtime/` or `icd/` over `MAX_LINES` lines.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Bottom first: a module may use itself and those before it, never one after it.
const LAYERS: &[&str] = &["observe", "cluster", "native", "objects", "enqueue"];

/// At most this many top-level modules (a reader keeps them in mind at once).
const MAX_MODULES: usize = 12;

const MAX_LINES: usize = 900;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a source folder") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The top-level module a file of `src/` belongs to (`None`: the crate root, a binary).
fn top_module(file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src()).expect("under src");
    let first = rel.components().next()?.as_os_str().to_str()?;
    match first {
        "lib.rs" | "bin" => None,
        f => Some(f.trim_end_matches(".rs").to_string()),
    }
}

/// The code of a file without its comments (a doc link is not an import).
fn code(text: &str) -> String {
    text.lines()
        .map(|line| match line.find("//") {
            Some(i) if !line[..i].contains('"') => &line[..i],
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The top-level modules a file's code names through `crate::` (paths and `use
/// crate::{a, b::c}` groups alike) or `$crate::` (macros).
fn used_modules(code: &str, modules: &[String]) -> Vec<String> {
    let mut used = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        rest = &rest[i + "crate::".len()..];
        let names: Vec<&str> = if let Some(group) = rest.strip_prefix('{') {
            let end = group.find("};").unwrap_or(group.len());
            // Top-level names of the group: each item's first path segment.
            let mut depth = 0;
            let mut items = Vec::new();
            let mut start = 0;
            for (k, c) in group[..end].char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        items.push(&group[start..k]);
                        start = k + 1;
                    }
                    _ => {}
                }
            }
            items.push(&group[start..end]);
            items
                .into_iter()
                .map(|item| item.trim().split("::").next().unwrap_or(""))
                .collect()
        } else {
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            vec![&rest[..end]]
        };
        for name in names {
            if modules.iter().any(|m| m == name) && !used.iter().any(|u| u == name) {
                used.push(name.to_string());
            }
        }
    }
    used
}

fn top_modules() -> Vec<String> {
    let mut modules: Vec<String> = std::fs::read_dir(src())
        .expect("runtime/src")
        .filter_map(|e| {
            let path = e.ok()?.path();
            let name = path.file_name()?.to_str()?.to_string();
            if path.is_dir() && name != "bin" {
                Some(name)
            } else {
                name.strip_suffix(".rs")
                    .filter(|n| *n != "lib")
                    .map(str::to_string)
            }
        })
        .collect();
    modules.sort();
    modules
}

#[test]
fn every_top_level_module_has_a_layer() {
    let modules = top_modules();
    assert!(
        modules.len() <= MAX_MODULES,
        "{} top-level modules in runtime/src (at most {MAX_MODULES}): {modules:?}",
        modules.len()
    );
    for m in &modules {
        assert!(
            LAYERS.contains(&m.as_str()),
            "runtime/src/{m} is in no layer: add it to LAYERS in runtime/tests/layers.rs \
             and to the picture in docs/architecture.md"
        );
    }
}

#[test]
fn no_module_imports_from_a_layer_above_it() {
    let modules = top_modules();
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    files.sort();
    let mut upward: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for file in &files {
        let Some(me) = top_module(file) else {
            continue;
        };
        let level = |m: &str| LAYERS.iter().position(|l| *l == m);
        let Some(mine) = level(&me) else {
            continue; // every_top_level_module_has_a_layer reports it
        };
        let text = std::fs::read_to_string(file).expect("a source file");
        for used in used_modules(&code(&text), &modules) {
            if level(&used).is_some_and(|theirs| theirs > mine) {
                let rel = file.strip_prefix(src()).expect("under src").display();
                upward
                    .entry(format!("{me} -> {used}"))
                    .or_default()
                    .push(rel.to_string());
            }
        }
    }
    assert!(
        upward.is_empty(),
        "imports from a layer above (layers, bottom first: {LAYERS:?}):\n{}",
        upward
            .iter()
            .map(|(edge, files)| format!("  {edge}: {}", files.join(", ")))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn the_import_reader_sees_paths_and_groups() {
    let modules: Vec<String> = LAYERS.iter().map(|s| s.to_string()).collect();
    let code = code(
        "use crate::objects::event::Event;\n\
         use crate::{cluster::node, native::{VMem, VQueue}};\n\
         // crate::enqueue in a comment is not an import\n\
         $crate::observe::trace::on()",
    );
    let mut used = used_modules(&code, &modules);
    used.sort();
    assert_eq!(used, ["cluster", "native", "objects", "observe"]);
}

#[test]
fn no_source_file_is_over_the_size_limit() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    rust_files(&root.join("runtime/src"), &mut files);
    rust_files(&root.join("icd/src"), &mut files);
    let mut long: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let lines = std::fs::read_to_string(f).ok()?.lines().count();
            (lines > MAX_LINES).then(|| format!("{} ({lines} lines)", f.display()))
        })
        .collect();
    long.sort();
    assert!(
        long.is_empty(),
        "source files over {MAX_LINES} lines (cut them along what each part does): {long:?}"
    );
}
