//! No circle of files in any crate: no two source files import each other, directly or
//! around a circle. A file imports another when it names an item of it through a
//! `crate::`, `super::` or `self::` path, or through the name of one of its own child
//! modules (in a `use` or anywhere in its code). Inline `#[cfg(test)] mod ... { }` blocks
//! are left out (tests beside the code may reach up). A module's files are `x.rs` or
//! `x/mod.rs`; `src/bin/` is skipped (binaries are crates of their own).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type ModPath = Vec<String>;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace")
        .to_path_buf()
}

/// Every module file under `src`, by module path.
fn module_files(src: &Path) -> BTreeMap<ModPath, PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    walk(src, &mut files);
    let mut mods = BTreeMap::new();
    for p in files {
        let rel = p.strip_prefix(src).unwrap().with_extension("");
        let parts: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if parts.first().is_some_and(|f| f == "bin") {
            continue;
        }
        let path = match parts.as_slice() {
            [one] if one == "lib" || one == "main" => Vec::new(),
            [rest @ .., last] if last == "mod" => rest.to_vec(),
            all => all.to_vec(),
        };
        mods.insert(path, p);
    }
    mods
}

/// The text with comments, string and char literals blanked out.
fn strip_comments(text: &str) -> String {
    let b: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(b.len());
    let mut i = 0;
    let at = |i: usize, s: &str| s.chars().enumerate().all(|(k, c)| b.get(i + k) == Some(&c));
    while i < b.len() {
        let c = b[i];
        if at(i, "//") {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
        } else if at(i, "/*") {
            let mut depth = 1;
            i += 2;
            while i < b.len() && depth > 0 {
                if at(i, "/*") {
                    depth += 1;
                    i += 2;
                } else if at(i, "*/") {
                    depth -= 1;
                    i += 2;
                } else {
                    i += 1;
                }
            }
        } else if c == 'r'
            && (i == 0 || !(b[i - 1].is_alphanumeric() || b[i - 1] == '_'))
            && matches!(b.get(i + 1), Some('"' | '#'))
        {
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= b.len() {
                    break;
                }
                if b[j] == '"' && (0..hashes).all(|k| b.get(j + 1 + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j;
        } else if c == '"' {
            i += 1;
            while i < b.len() && b[i] != '"' {
                i += if b[i] == '\\' { 2 } else { 1 };
            }
            out.push_str("\"\"");
            i += 1;
        } else if c == '\'' && b.get(i + 2) == Some(&'\'') {
            out.push_str("' '");
            i += 3;
        } else if c == '\'' && b.get(i + 1) == Some(&'\\') {
            let mut j = i + 2;
            while j < b.len() && j < i + 12 && b[j] != '\'' {
                j += 1;
            }
            out.push_str("' '");
            i = j + 1;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// The text without inline `#[cfg(test)] mod NAME { ... }` blocks.
fn strip_tests(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("#[cfg(test)]") {
        let after = &rest[i + "#[cfg(test)]".len()..];
        let t = after.trim_start();
        let t2 = t.strip_prefix("pub ").unwrap_or(t);
        let is_inline_mod = t2
            .strip_prefix("mod ")
            .and_then(|m| {
                let name_end = m.find(|c: char| !(c.is_alphanumeric() || c == '_'))?;
                Some(m[name_end..].trim_start().starts_with('{'))
            })
            .unwrap_or(false);
        if !is_inline_mod {
            out.push_str(&rest[..i + "#[cfg(test)]".len()]);
            rest = after;
            continue;
        }
        out.push_str(&rest[..i]);
        let open = i + "#[cfg(test)]".len() + after.find('{').unwrap();
        let mut depth = 0;
        let mut end = rest.len();
        for (k, ch) in rest[open..].char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + k + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// `a::{b, c::{d, e}}` as the paths it names.
fn expand_use(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        let t = tree.split(" as ").next().unwrap_or(tree).trim();
        return vec![t.to_owned()];
    };
    let Some(close) = tree.rfind('}') else {
        return Vec::new();
    };
    let prefix = &tree[..open];
    let inner = &tree[open + 1..close];
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (k, ch) in inner.char_indices() {
        match ch {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..k]);
                start = k + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
        .into_iter()
        .filter(|p| !p.trim().is_empty())
        .flat_map(|p| {
            expand_use(p)
                .into_iter()
                .map(move |e| format!("{prefix}{e}"))
        })
        .collect()
}

/// The module file a path names from module `here`, if it names one of this crate.
fn resolve(segs: &[&str], here: &ModPath, mods: &BTreeMap<ModPath, PathBuf>) -> Option<ModPath> {
    let (mut cur, mut segs) = (here.clone(), segs);
    match segs.first()? {
        &"crate" => {
            cur.clear();
            segs = &segs[1..];
        }
        &"super" | &"self" => {
            while let Some(&s) = segs.first() {
                match s {
                    "super" => {
                        cur.pop();
                    }
                    "self" => {}
                    _ => break,
                }
                segs = &segs[1..];
            }
        }
        first => {
            let mut child = cur.clone();
            child.push((*first).to_owned());
            if !mods.contains_key(&child) {
                return None;
            }
        }
    }
    let mut best = None;
    for k in 0..=segs.len() {
        let mut cand = cur.clone();
        cand.extend(segs[..k].iter().map(|s| (*s).to_owned()));
        if mods.contains_key(&cand) {
            best = Some(cand);
        }
    }
    best
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Every path of the form `crate::a::b`, `super::x`, `self::y` in the text.
fn qualified_paths(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for key in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(k) = text[from..].find(key) {
            let start = from + k;
            from = start + key.len();
            // Not the tail of an identifier, nor the inner `super` of `super::super::x`.
            if (start > 0 && text[..start].chars().next_back().is_some_and(is_ident))
                || text[..start].ends_with("::")
            {
                continue;
            }
            let mut end = start;
            let rest = &text[start..];
            let mut it = rest.char_indices().peekable();
            while let Some((k, ch)) = it.next() {
                if is_ident(ch) {
                    end = start + k + ch.len_utf8();
                } else if ch == ':' && rest[k..].starts_with("::") {
                    it.next();
                } else {
                    break;
                }
            }
            // `super::{a, b}` is a use tree (read by `expand_use`), not a path.
            if end > start + key.len() {
                out.push(text[start..end].to_owned());
            }
        }
    }
    out
}

fn graph(src: &Path) -> BTreeMap<ModPath, BTreeSet<ModPath>> {
    let mods = module_files(src);
    let mut edges = BTreeMap::new();
    for (m, p) in &mods {
        let text = strip_comments(&strip_tests(&std::fs::read_to_string(p).unwrap()));
        let mut paths = Vec::new();
        let mut rest = text.as_str();
        while let Some(k) = rest.find("use ") {
            let before_ok = k == 0 || !rest[..k].chars().next_back().is_some_and(is_ident);
            let after = &rest[k + 4..];
            if let (true, Some(end)) = (before_ok, after.find(';')) {
                paths.extend(expand_use(&after[..end]));
            }
            rest = after;
        }
        paths.extend(qualified_paths(&text));
        let mut targets = BTreeSet::new();
        for path in paths {
            let segs: Vec<&str> = path
                .split("::")
                .map(str::trim)
                .filter(|s| !s.is_empty() && *s != "*")
                .collect();
            if let Some(t) = resolve(&segs, m, &mods) {
                if &t != m && !t.is_empty() {
                    targets.insert(t);
                }
            }
        }
        edges.insert(m.clone(), targets);
    }
    edges
}

/// Strongly connected components of more than one file (Tarjan).
fn circles(edges: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> Vec<Vec<ModPath>> {
    struct T<'a> {
        edges: &'a BTreeMap<ModPath, BTreeSet<ModPath>>,
        index: BTreeMap<&'a ModPath, usize>,
        low: BTreeMap<&'a ModPath, usize>,
        stack: Vec<&'a ModPath>,
        on: BTreeSet<&'a ModPath>,
        out: Vec<Vec<ModPath>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a ModPath) {
        let n = t.index.len();
        t.index.insert(v, n);
        t.low.insert(v, n);
        t.stack.push(v);
        t.on.insert(v);
        for w in &t.edges[v] {
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if t.on.contains(w) {
                let iw = t.index[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                comp.push(w.clone());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                t.out.push(comp);
            }
        }
    }
    let mut t = T {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !t.index.contains_key(v) {
            visit(&mut t, v);
        }
    }
    t.out
}

#[test]
fn no_crate_has_a_circle_of_files() {
    let mut found = Vec::new();
    let mut crates = 0;
    for e in std::fs::read_dir(root()).unwrap().flatten() {
        let src = e.path().join("src");
        if !e.path().join("Cargo.toml").is_file() || !src.is_dir() {
            continue;
        }
        crates += 1;
        for comp in circles(&graph(&src)) {
            let names: Vec<String> = comp.iter().map(|m| m.join("::")).collect();
            found.push(format!("{}: {}", e.path().display(), names.join(", ")));
        }
    }
    assert!(crates >= 10, "found only {crates} crates");
    assert!(found.is_empty(), "circles of files:\n{}", found.join("\n"));
}

#[test]
fn the_checker_finds_a_circle_and_reads_paths_as_rust_does() {
    assert_eq!(
        expand_use("crate::a::{b, c::{d, e as f}}"),
        ["crate::a::b", "crate::a::c::d", "crate::a::c::e"]
    );
    assert_eq!(
        strip_comments("let s = \"crate::x\"; // crate::y\nlet c = '\"'; crate::z::w"),
        "let s = \"\"; \nlet c = ' '; crate::z::w"
    );
    assert_eq!(
        strip_tests("a\n#[cfg(test)]\nmod tests {\n use super::*; { }\n}\nb"),
        "a\n\nb"
    );
    let mut mods = BTreeMap::new();
    for m in [vec![], vec!["a".to_owned()], vec!["b".to_owned()]] {
        mods.insert(m, PathBuf::new());
    }
    let a = vec!["a".to_owned()];
    assert_eq!(
        resolve(&["crate", "b", "X"], &a, &mods),
        Some(vec!["b".to_owned()])
    );
    assert_eq!(
        resolve(&["super", "b"], &a, &mods),
        Some(vec!["b".to_owned()])
    );
    assert_eq!(resolve(&["std", "io"], &a, &mods), None);
    assert_eq!(
        qualified_paths("use super::{b, c}; crate::a::f(); xself::q; super::super::r::T"),
        ["crate::a::f", "super::super::r::T"]
    );
    let mut edges = BTreeMap::new();
    edges.insert(a.clone(), BTreeSet::from([vec!["b".to_owned()]]));
    edges.insert(vec!["b".to_owned()], BTreeSet::from([a.clone()]));
    assert_eq!(circles(&edges).len(), 1);
}
