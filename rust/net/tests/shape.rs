//! The crate's module graph has no cycle: a module's `crate::` uses (outside comments) point only
//! "down", so each module can be read and tested on its own (issue 31 item 7).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

/// Module name -> the modules its code (not its comments) names as `crate::<module>`.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = BTreeMap::new();
    for entry in fs::read_dir(&dir).expect("src/ is readable") {
        let path = entry.expect("a directory entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("rs") {
            continue;
        }
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let text = fs::read_to_string(&path).expect("a source file");
        let mut uses = BTreeSet::new();
        for line in text.lines() {
            let code = line.split("//").next().unwrap_or("");
            for part in code.split("crate::").skip(1) {
                let module: String = part
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !module.is_empty() && module != name {
                    uses.insert(module);
                }
            }
        }
        out.insert(name, uses);
    }
    out
}

#[test]
fn modules_import_each_other_without_a_cycle() {
    let g = graph();
    assert!(g.contains_key("send") && g.contains_key("server"), "{g:?}");
    // Depth-first search for a back edge.
    fn visit(
        m: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) {
        if done.contains(m) {
            return;
        }
        if let Some(at) = path.iter().position(|p| p == m) {
            panic!("import cycle: {} -> {m}", path[at..].join(" -> "));
        }
        path.push(m.to_string());
        for next in g.get(m).into_iter().flatten() {
            visit(next, g, path, done);
        }
        path.pop();
        done.insert(m.to_string());
    }
    let mut done = BTreeSet::new();
    for m in g.keys() {
        visit(m, &g, &mut Vec::new(), &mut done);
    }
}

#[test]
fn only_the_crate_root_uses_the_event_loop() {
    // server.rs is the event loop: the request handlers (send, held answers, replication) do not
    // reach into it.
    for (module, uses) in graph() {
        if module != "lib" {
            assert!(!uses.contains("server"), "{module} uses crate::server");
        }
    }
}
