//! The documentation stays true to the tree: every relative link in the workspace's
//! Markdown files (README.md, CHANGELOG.md, docs/ and each crate's pages) resolves to a
//! file, and to a heading where it names one; every file path a page quotes in backticks
//! exists; and every `cargo xtask ...` command a page shows is a command xtask has, with
//! options its `--help` lists (for `demo`, `scenario` and `replay`, which hand their
//! arguments to the `scenario` tool, only the command is checked).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

const XTASK: &str = env!("CARGO_BIN_EXE_xtask");

/// Commands whose arguments xtask passes on unchanged.
const PASS_THROUGH: &[&str] = &["demo", "scenario", "replay"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace")
        .to_path_buf()
}

/// Every Markdown page of the workspace, outside build output, fuzz corpora and git.
fn pages() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if p.is_dir() {
                if !matches!(name.as_str(), "target" | ".git" | "corpus" | "node_modules") {
                    walk(&p, out);
                }
            } else if name.ends_with(".md") {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(&root(), &mut out);
    out.sort();
    out
}

/// The page's text with fenced code blocks removed (links inside them are code).
fn prose(text: &str) -> String {
    let mut out = String::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

/// GitHub's anchor for a heading: lower case, punctuation other than `-` and `_` dropped,
/// spaces made hyphens.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn anchors(page: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(page).unwrap_or_default();
    prose(&text)
        .lines()
        .filter(|l| l.starts_with('#'))
        .map(|l| slug(l.trim_start_matches('#')))
        .collect()
}

/// The targets of `[text](target)` links in prose.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("](") {
        let after = &rest[i + 2..];
        if let Some(end) = after.find(')') {
            out.push(after[..end].trim().to_owned());
        }
        rest = after;
    }
    out
}

/// Inline code spans (single backticks) of the prose.
fn code_spans(text: &str) -> Vec<String> {
    text.split('`')
        .enumerate()
        .filter(|(i, _)| i % 2 == 1)
        .map(|(_, s)| s.to_owned())
        .collect()
}

#[test]
fn every_relative_link_resolves() {
    let mut broken = Vec::new();
    let pages = pages();
    assert!(pages.len() >= 8, "found only {} pages", pages.len());
    for page in &pages {
        let text = prose(&std::fs::read_to_string(page).unwrap());
        for target in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") || target.is_empty() {
                continue;
            }
            let (file, anchor) = match target.split_once('#') {
                Some((f, a)) => (f, Some(a)),
                None => (target.as_str(), None),
            };
            let dest = if file.is_empty() {
                page.clone()
            } else {
                page.parent().unwrap().join(file)
            };
            if !dest.exists() {
                broken.push(format!("{}: {target}: no such file", page.display()));
                continue;
            }
            if let Some(a) = anchor {
                if dest.extension().is_some_and(|e| e == "md") && !anchors(&dest).contains(a) {
                    broken.push(format!("{}: {target}: no such heading", page.display()));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn every_quoted_file_path_exists() {
    const EXTENSIONS: &[&str] = &[
        ".rs", ".toml", ".md", ".py", ".sh", ".c", ".pcap", ".yml", ".sbatch", ".map",
    ];
    // Paths in other projects' trees (rdma-core, the kernel, UCX, QEMU, DPDK, spead2) that
    // the pages cite as sources.
    const ELSEWHERE: &[&str] = &[
        "providers/",
        "drivers/",
        "libibverbs/",
        "librdmacm/",
        "pyverbs/",
        "kernel-headers/",
        "src/uct/",
        "net/",
        "tests/test_",
        "src/common_ibv",
        "src/recv_udp_ibv",
    ];
    let root = root();
    let crates: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    let mut missing = Vec::new();
    for page in pages() {
        let text = prose(&std::fs::read_to_string(&page).unwrap());
        for span in code_spans(&text) {
            let path = span.trim();
            let looks_like_a_path = path.contains('/')
                && EXTENSIONS.iter().any(|e| path.ends_with(e))
                && path
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_-./".contains(c))
                && !path.starts_with('/')
                && !path.starts_with("target/")
                && !path.contains("..")
                && !ELSEWHERE.iter().any(|e| path.starts_with(e));
            if !looks_like_a_path {
                continue;
            }
            let here = page.parent().unwrap();
            let found = root.join(path).exists()
                || here.join(path).exists()
                || crates.iter().any(|c| c.join(path).exists());
            if !found {
                missing.push(format!("{}: `{path}`", page.display()));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "quoted paths that do not exist:\n{}",
        missing.join("\n")
    );
}

/// `cargo xtask ...` commands shown anywhere in a page (code blocks included), as words.
fn xtask_commands(text: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut rest = line;
        while let Some(i) = rest.find("cargo xtask") {
            let after = &rest[i + "cargo xtask".len()..];
            let end = after.find(['`', '#', ')', ';']).unwrap_or(after.len());
            let words = after[..end]
                .split_whitespace()
                .map(str::to_owned)
                .collect::<Vec<_>>();
            out.push(words);
            rest = after;
        }
    }
    out
}

fn help(args: &[&str]) -> Option<String> {
    let out = Command::new(XTASK).args(args).arg("--help").output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn every_xtask_command_the_docs_show_exists() {
    let mut wrong = Vec::new();
    let mut seen = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for words in xtask_commands(&text) {
            let Some(first) = words.first() else {
                continue;
            };
            // `cargo xtask test|ci|demo ...` names several; `COMMAND` is a placeholder.
            let names: Vec<&str> = first.split('|').collect();
            if first.starts_with("--") || first.chars().all(|c| c.is_ascii_uppercase()) {
                continue;
            }
            for name in names {
                if name == "..." || name.is_empty() {
                    continue;
                }
                seen += 1;
                let Some(text) = help(&[name]) else {
                    wrong.push(format!(
                        "{}: cargo xtask {name}: no such command",
                        page.display()
                    ));
                    continue;
                };
                if PASS_THROUGH.contains(&name) {
                    continue;
                }
                for w in words.iter().skip(1) {
                    if w == "--" {
                        break;
                    }
                    let flag = w
                        .trim_start_matches('[')
                        .split(['=', ']', ','])
                        .next()
                        .unwrap_or("");
                    if flag.starts_with("--") && flag.len() > 2 && !text.contains(flag) {
                        wrong.push(format!(
                            "{}: cargo xtask {name} {flag}: not an option of the command",
                            page.display()
                        ));
                    }
                }
            }
        }
    }
    assert!(seen > 20, "found only {seen} commands in the docs");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn slugs_follow_github() {
    assert_eq!(slug(" Using verbs-api"), "using-verbs-api");
    assert_eq!(
        slug("Frames and captures (netwire)"),
        "frames-and-captures-netwire"
    );
    assert_eq!(
        links("see [a](docs/a.md#x) and [b](https://x.y)"),
        ["docs/a.md#x", "https://x.y"]
    );
}
