//! docs/compatibility.md's table of the clients and tools tested, checked against where each
//! version is set: its "Version" column must be what its "Version from" column finds, a pin in
//! the repository (Cargo.lock, a pom.xml, .ci/run's pip requirements, tests/kafka/kafka.sh) or
//! the version an installed tool reports (`$ kcat -V`); each suite, test file and script its
//! "Suites" column names must exist. A row that is wrong fails the test with its line.

use std::path::Path;
use std::process::Command;

const PAGE: &str = "docs/compatibility.md";
const HEADER: &str = "| Client or tool | Version | Version from | Suites |";

/// A row of the table: its line (1-based), its name, version and source.
struct Row {
    line: usize,
    name: String,
    version: String,
    source: String,
    suites: String,
}

fn rows(text: &str) -> Vec<Row> {
    let lines: Vec<&str> = text.lines().collect();
    let header = lines
        .iter()
        .position(|l| l.trim() == HEADER)
        .unwrap_or_else(|| panic!("{PAGE}: no table with the header {HEADER}"));
    lines[header + 2..]
        .iter()
        .enumerate()
        .take_while(|(_, l)| l.starts_with('|'))
        .map(|(i, l)| {
            let line = header + 3 + i;
            let cells: Vec<&str> = l
                .trim()
                .trim_matches('|')
                .split('|')
                .map(str::trim)
                .collect();
            assert_eq!(cells.len(), 4, "{PAGE}:{line}: not 4 cells: {l}");
            Row {
                line,
                name: cells[0].to_string(),
                version: cells[1].replace([' ', '`'], ""),
                source: cells[2].trim_matches('`').to_string(),
                suites: cells[3].to_string(),
            }
        })
        .collect()
}

/// The version `source` finds, or why it finds none.
fn truth(repo: &Path, source: &str) -> Result<String, String> {
    if let Some(command) = source.strip_prefix("$ ") {
        return reported(command);
    }
    let words: Vec<&str> = source.split_whitespace().collect();
    let (file, key, build_metadata) = match words[..] {
        [file, key] => (file, key, false),
        [file, key, "+"] => (file, key, true),
        _ => return Err(format!("`{source}` is not `FILE KEY [+]` nor `$ COMMAND`")),
    };
    let text = std::fs::read_to_string(repo.join(file)).map_err(|e| format!("{file}: {e}"))?;
    let version = if file == "Cargo.lock" {
        cargo_lock(&text, key)
    } else if file.ends_with("pom.xml") {
        pom(&text, key)
    } else if file == ".ci/run" {
        pip_requirement(&text, key)
    } else if file.ends_with(".sh") {
        shell_default(&text, key)
    } else if file.ends_with("go.mod") {
        go_require(&text, key)
    } else {
        Err("no reader for this file".to_string())
    }
    .map_err(|e| format!("{file} {key}: {e}"))?;
    if build_metadata {
        return version
            .split_once('+')
            .map(|(_, c)| c.to_string())
            .ok_or_else(|| format!("{file} {key}: {version} has no `+`"));
    }
    Ok(version)
}

/// The version of package `name` in Cargo.lock (only one may be locked).
fn cargo_lock(text: &str, name: &str) -> Result<String, String> {
    let packages: Vec<&str> = text
        .split("[[package]]")
        .filter(|p| p.lines().any(|l| l.trim() == format!("name = \"{name}\"")))
        .collect();
    let [package] = packages[..] else {
        return Err(format!("{} packages of that name", packages.len()));
    };
    package
        .lines()
        .find_map(|l| l.trim().strip_prefix("version = \""))
        .map(|v| v.trim_end_matches('"').to_string())
        .ok_or_else(|| "no version".to_string())
}

/// The `<version>` of artifact `artifact` in a pom.xml, `${property}` resolved.
fn pom(text: &str, artifact: &str) -> Result<String, String> {
    let tag = |s: &str, name: &str| -> Option<String> {
        let open = format!("<{name}>");
        let start = s.find(&open)? + open.len();
        let end = s[start..].find(&format!("</{name}>"))?;
        Some(s[start..start + end].trim().to_string())
    };
    let at = text
        .find(&format!("<artifactId>{artifact}</artifactId>"))
        .ok_or("no such artifactId")?;
    let dependency_end = text[at..].find("</dependency>").ok_or("not a dependency")?;
    let version =
        tag(&text[at..at + dependency_end], "version").ok_or("no <version> in its dependency")?;
    match version.strip_prefix("${").and_then(|v| v.strip_suffix('}')) {
        Some(property) => {
            tag(text, property).ok_or_else(|| format!("no property <{property}> in the pom"))
        }
        None => Ok(version),
    }
}

/// The pip requirement of `package` in .ci/run (`'confluent-kafka>=2.16'` is `>=2.16`,
/// `'kafka-python==2.0.2'` is `2.0.2`).
fn pip_requirement(text: &str, package: &str) -> Result<String, String> {
    let quoted = format!("'{package}");
    let at = text.find(&quoted).ok_or("no such requirement")? + quoted.len();
    let end = text[at..].find('\'').ok_or("unclosed quote")?;
    let spec = &text[at..at + end];
    if !spec.starts_with(['>', '<', '=', '~', '!']) {
        return Err(format!("`{spec}` is not a version specifier"));
    }
    Ok(spec.strip_prefix("==").unwrap_or(spec).to_string())
}

/// The version `module` is required at in a go.mod (`github.com/twmb/franz-go v1.22.3` is
/// `1.22.3`), in a `require (...)` block or a one-line `require`.
fn go_require(text: &str, module: &str) -> Result<String, String> {
    text.lines()
        .map(|l| l.trim().trim_start_matches("require").trim())
        .find_map(|l| l.strip_prefix(module)?.strip_prefix(' '))
        .map(|v| {
            v.split_whitespace()
                .next()
                .unwrap_or("")
                .trim_start_matches('v')
                .to_string()
        })
        .ok_or_else(|| "no such requirement".to_string())
}

/// The value of `VAR="${OVERRIDE:-default}"` (its default) or `VAR=value` in a shell script.
fn shell_default(text: &str, var: &str) -> Result<String, String> {
    let value = text
        .lines()
        .find_map(|l| l.trim().strip_prefix(&format!("{var}=")))
        .ok_or("no such assignment")?
        .trim_matches('"');
    Ok(match value.split_once(":-") {
        Some((_, default)) => default.trim_end_matches('}').to_string(),
        None => value.to_string(),
    })
}

/// The first version (digits and dots) in what `command` prints.
fn reported(command: &str) -> Result<String, String> {
    let out = Command::new("bash")
        .arg("-c")
        .arg(command)
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .map_err(|e| format!("`{command}`: {e}"))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if !out.status.success() {
        return Err(format!(
            "`{command}` failed ({}; .ci/run installs the tools): {text}",
            out.status
        ));
    }
    text.split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .map(|w| w.trim_matches('.'))
        .find(|w| w.contains('.') && w.split('.').all(|p| !p.is_empty()))
        .map(str::to_string)
        .ok_or_else(|| format!("no version in the output of `{command}`: {text}"))
}

/// The code spans of `cell` that name a test suite (`e2e`), a test file (`fairness.rs`) or a
/// script (`tests/kafka/admin_tools.sh`) and do not exist; other spans are not names.
fn missing_suites(repo: &Path, cell: &str) -> Vec<String> {
    let suites: String = ["cli/Cargo.toml", "benches/Cargo.toml"]
        .iter()
        .map(|f| std::fs::read_to_string(repo.join(f)).unwrap())
        .collect();
    let test_files = files_under(&repo.join("tests"));
    cell.split('`')
        .skip(1)
        .step_by(2)
        .filter(|span| {
            let is_name = |c: char| c.is_ascii_lowercase() || c == '_' || c == '-';
            if span.ends_with(".rs") || span.ends_with(".sh") {
                !(repo.join(span).is_file()
                    || test_files
                        .iter()
                        .any(|f| f.file_name().is_some_and(|n| n == *span)))
            } else if span.chars().all(is_name) {
                !suites.contains(&format!("name = \"{span}\""))
            } else {
                false
            }
        })
        .map(str::to_string)
        .collect()
}

fn files_under(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(files_under(&path));
        } else {
            files.push(path);
        }
    }
    files
}

#[test]
fn the_compatibility_table_matches_the_versions_tested() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let text = std::fs::read_to_string(repo.join(PAGE)).unwrap();
    let rows = rows(&text);
    assert!(
        rows.len() >= 10,
        "{PAGE}: {} rows in the table of clients and tools",
        rows.len()
    );
    let mut wrong = Vec::new();
    for row in &rows {
        match truth(&repo, &row.source) {
            Ok(version) if version == row.version => {
                println!(
                    "{PAGE}:{}: {} {version} ({})",
                    row.line, row.name, row.source
                )
            }
            Ok(version) => wrong.push(format!(
                "{PAGE}:{}: {} is {} on the page, {version} by `{}`",
                row.line, row.name, row.version, row.source
            )),
            Err(e) => wrong.push(format!("{PAGE}:{}: {}: {e}", row.line, row.name)),
        }
        let missing = missing_suites(&repo, &row.suites);
        if !missing.is_empty() {
            wrong.push(format!(
                "{PAGE}:{}: {}: no suite, test file or script {missing:?}",
                row.line, row.name
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn version_sources_are_read_as_written() {
    let lock = "[[package]]\nname = \"a\"\nversion = \"1.0.0\"\n\n[[package]]\nname = \"a-sys\"\nversion = \"4.1.0+2.3.4\"\n";
    assert_eq!(cargo_lock(lock, "a").unwrap(), "1.0.0");
    assert_eq!(cargo_lock(lock, "a-sys").unwrap(), "4.1.0+2.3.4");
    assert!(cargo_lock(lock, "b").is_err());
    let pom_xml = "<properties><k.version>4.4.0</k.version></properties>\n<dependency><artifactId>x</artifactId><version>1.2</version></dependency>\n<dependency><artifactId>y</artifactId><version>${k.version}</version></dependency>";
    assert_eq!(pom(pom_xml, "x").unwrap(), "1.2");
    assert_eq!(pom(pom_xml, "y").unwrap(), "4.4.0");
    let run = "pip install 'confluent-kafka>=2.16' 'kafka-python==2.0.2'";
    assert_eq!(pip_requirement(run, "confluent-kafka").unwrap(), ">=2.16");
    assert_eq!(pip_requirement(run, "kafka-python").unwrap(), "2.0.2");
    let sh = "KAFKA_VERSION=\"${LOGRAIL_KAFKA_VERSION:-4.4.0}\"\nOTHER=1.2\n";
    assert_eq!(shell_default(sh, "KAFKA_VERSION").unwrap(), "4.4.0");
    assert_eq!(shell_default(sh, "OTHER").unwrap(), "1.2");
    let go_mod = "module m\n\nrequire (\n\tgithub.com/a/b v1.22.3\n\tgithub.com/a/b/c v1.20.0\n)\nrequire github.com/d/e v0.1.0 // indirect\n";
    assert_eq!(go_require(go_mod, "github.com/a/b").unwrap(), "1.22.3");
    assert_eq!(go_require(go_mod, "github.com/a/b/c").unwrap(), "1.20.0");
    assert_eq!(go_require(go_mod, "github.com/d/e").unwrap(), "0.1.0");
    assert!(go_require(go_mod, "github.com/a").is_err());
    assert_eq!(
        reported("echo 'tool - x 2014-2021'; echo 'Version 1.7.1 (librdkafka 2.0.2)'").unwrap(),
        "1.7.1"
    );
}
