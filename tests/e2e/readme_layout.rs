//! The README's "Layout" table against the tree: every folder at the top of the repository
//! (of the files git tracks) has a row, and every row names a folder that exists.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

#[test]
fn the_readme_layout_names_every_top_level_folder() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let readme = std::fs::read_to_string(repo.join("README.md")).unwrap();
    let table = readme
        .split_once("\n## Layout\n")
        .expect("README.md has a \"## Layout\" section")
        .1;
    // Rows are "| `folder/` | what |"; the table ends at the first line that is not a row.
    let rows: Vec<&str> = table
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .filter_map(|l| l.strip_prefix("| `")?.split_once("/` |").map(|(f, _)| f))
        .collect();
    for folder in &rows {
        assert!(
            repo.join(folder).is_dir(),
            "README.md's Layout names `{folder}/`, which does not exist"
        );
    }
    let listed: BTreeSet<&str> = rows.iter().map(|f| f.split('/').next().unwrap()).collect();
    let out = Command::new("git")
        .arg("-C")
        .arg(&repo)
        .args(["ls-files", "--cached"])
        .output()
        .expect("git, to list the tracked files");
    assert!(out.status.success(), "git ls-files failed");
    let files = String::from_utf8(out.stdout).unwrap();
    let tracked: BTreeSet<&str> = files
        .lines()
        .filter_map(|path| path.split_once('/').map(|(top, _)| top))
        .collect();
    let missing: Vec<&&str> = tracked.difference(&listed).collect();
    assert!(
        missing.is_empty(),
        "README.md's Layout has no row for {missing:?} (listed: {listed:?})"
    );
}
