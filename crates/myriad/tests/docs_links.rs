//! Every relative link in the project's Markdown (README, CHANGELOG, docs/ and the
//! crates' READMEs) resolves: to a file or directory of the repository, and where it
//! names an anchor (`page.md#heading`, `#heading`), to a heading of that page, slugged
//! as GitHub does. The docs also name no development machine's paths. No server
//! needed: this reads files.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the repository root")
}

/// The Markdown files whose links are checked.
fn pages(root: &Path) -> Vec<PathBuf> {
    let mut out = vec![root.join("README.md"), root.join("CHANGELOG.md")];
    let mut dirs = vec![root.join("docs")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    for entry in std::fs::read_dir(root.join("crates")).unwrap() {
        let readme = entry.unwrap().path().join("README.md");
        if readme.is_file() {
            out.push(readme);
        }
    }
    out.sort();
    out
}

/// The lines of `text` outside fenced code blocks.
fn prose(text: &str) -> Vec<&str> {
    let mut fenced = false;
    text.lines()
        .filter(|l| {
            if l.trim_start().starts_with("```") {
                fenced = !fenced;
                return false;
            }
            !fenced
        })
        .collect()
}

/// A heading's anchor as GitHub makes it: lower case, characters other than letters,
/// digits, spaces, `-` and `_` dropped, spaces turned into `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a page's headings (a repeated heading gets `-1`, `-2`, … as on GitHub).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    for line in prose(text) {
        let Some(heading) = line.strip_prefix('#') else {
            continue;
        };
        let base = slug(heading.trim_start_matches('#'));
        let mut anchor = base.clone();
        let mut n = 0;
        while seen.contains(&anchor) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
        seen.insert(anchor);
    }
    seen
}

/// The targets of the inline links `[text](target)` of a page's prose (inline code
/// spans left out).
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in prose(text) {
        let outside_code: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
        let mut rest = outside_code.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let end = after.find(')').unwrap_or(after.len());
            out.push(after[..end].trim().to_string());
            rest = &after[end..];
        }
    }
    out
}

#[test]
fn every_relative_link_resolves_to_a_file_and_heading() {
    let root = root();
    let mut problems = Vec::new();
    let mut checked = 0;
    for page in pages(&root) {
        let text = std::fs::read_to_string(&page).unwrap();
        let name = page.strip_prefix(&root).unwrap().display().to_string();
        for target in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
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
                problems.push(format!("{name}: ({target}): no file {}", dest.display()));
                continue;
            }
            let Some(anchor) = anchor else { continue };
            let dest_text = std::fs::read_to_string(&dest).unwrap_or_default();
            if !anchors(&dest_text).contains(anchor) {
                problems.push(format!(
                    "{name}: ({target}): {} has no heading with anchor #{anchor}",
                    dest.display()
                ));
            }
        }
    }
    assert!(
        checked >= 50,
        "only {checked} links found: is the link reader broken?"
    );
    assert!(problems.is_empty(), "\n{}\n", problems.join("\n"));
}

#[test]
fn the_docs_name_no_development_machine() {
    let root = root();
    let mut problems = Vec::new();
    for page in pages(&root) {
        let text = std::fs::read_to_string(&page).unwrap();
        let name = page.strip_prefix(&root).unwrap().display().to_string();
        for (n, line) in text.lines().enumerate() {
            // Citations of the old lab notebook (its content now lives in docs/decisions/).
            for word in [
                "/work/",
                "/root/",
                "/tmp/",
                "bench.lock",
                "NOTES,",
                "NOTES issue",
                " UTC",
            ] {
                if line.contains(word) {
                    problems.push(format!("{name}:{}: {word:?} in {line:?}", n + 1));
                }
            }
        }
    }
    assert!(problems.is_empty(), "\n{}\n", problems.join("\n"));
}

#[test]
fn slugs_are_github_s() {
    assert_eq!(
        slug(" Admin listener (`--admin`)"),
        "admin-listener---admin"
    );
    assert_eq!(slug(" Errors (SPEC D1–D4)"), "errors-spec-d1d4");
    assert_eq!(
        slug(" The router's publish port"),
        "the-routers-publish-port"
    );
    assert_eq!(slug(" Flags of `myriad serve`"), "flags-of-myriad-serve");
    let twice = anchors("# A\n## A\n```\n# not a heading\n```\n");
    assert_eq!(
        twice.into_iter().collect::<Vec<_>>(),
        ["a", "a-1"].map(String::from)
    );
}
