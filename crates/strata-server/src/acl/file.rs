//! The ACL file (`aclfile`): one `user <name> <rule> ...` line per user, as ACL LIST prints
//! them (format: `docs/format/acl-file.md`). Loading is all or nothing: any error names its
//! line and nothing changes.

use super::user::{merge_selectors, User};
use bytes::Bytes;
use std::path::Path;

/// Users from `text` (the file's contents; `file` names it in errors), or every error
/// found, in Redis's words.
pub fn parse(text: &str, file: &str, all_channels: bool) -> Result<Vec<User>, String> {
    let mut users: Vec<User> = Vec::new();
    let mut errors = String::new();
    for (i, line) in text.split('\n').enumerate() {
        let n = i + 1;
        let line = line.trim_matches(|c| matches!(c, ' ' | '\t' | '\r' | '\n'));
        if line.is_empty() {
            continue;
        }
        let words: Vec<Bytes> = line
            .split(' ')
            .filter(|w| !w.is_empty())
            .map(|w| Bytes::copy_from_slice(w.as_bytes()))
            .collect();
        if words.len() < 2 || &words[0][..] != b"user" {
            errors.push_str(&format!(
                "{file}:{n} should start with user keyword followed by the username. "
            ));
            continue;
        }
        let name = &words[1];
        if users.iter().any(|u| u.name == name) {
            errors.push_str(&format!(
                "WARNING: Duplicate user '{}' found on line {n}. ",
                String::from_utf8_lossy(name)
            ));
            continue;
        }
        let rules = match merge_selectors(&words[2..]) {
            Ok(r) => r,
            Err(first) => {
                errors.push_str(&format!(
                    "{file}:{n}: Unmatched parenthesis in acl selector starting at '{}'. ",
                    String::from_utf8_lossy(&first)
                ));
                continue;
            }
        };
        let mut u = User::new(name, all_channels);
        if let Err((op, e)) = u.apply_all(&rules) {
            errors.push_str(&format!(
                "{file}:{n}: Error in applying operation '{}': {e}. ",
                String::from_utf8_lossy(&op)
            ));
            continue;
        }
        users.push(u);
    }
    if !errors.is_empty() {
        errors.push_str(
            "WARNING: ACL errors detected, no change to the previously active ACL rules was \
             performed",
        );
        return Err(errors);
    }
    Ok(users)
}

/// Reads and parses the ACL file at `path`.
pub fn load(path: &Path, all_channels: bool) -> Result<Vec<User>, String> {
    let text = std::fs::read(path).map_err(|e| {
        format!(
            "Error loading ACLs, opening file '{}': {}",
            path.display(),
            os_text(&e)
        )
    })?;
    parse(
        &String::from_utf8_lossy(&text),
        &path.display().to_string(),
        all_channels,
    )
}

/// An I/O error as `strerror` prints it ("No such file or directory").
fn os_text(e: &std::io::Error) -> String {
    let t = e.to_string();
    match t.rsplit_once(" (os error ") {
        Some((text, _)) => text.to_string(),
        None => t,
    }
}

/// Writes `users` to `path` through a temporary file renamed over it (a crash leaves the
/// old file or the new one).
pub fn save(path: &Path, users: &[User]) -> std::io::Result<()> {
    let mut text = String::new();
    for u in users {
        text.push_str(&u.describe());
        text.push('\n');
    }
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_users_and_names_bad_lines() {
        let users = parse(
            "user default on nopass ~* &* +@all\n\nuser a on >x ~k* (~y +get) +get\n",
            "users.acl",
            false,
        )
        .unwrap();
        assert_eq!(users.len(), 2);
        assert!(users[1].password_ok(b"x"));
        assert_eq!(users[1].selectors.len(), 1);
        let err = parse(
            "user default on nopass ~* &* +@all\nuser a on >x ~k* +bogus\nfoo bar\n",
            "users.acl",
            false,
        )
        .unwrap_err();
        assert_eq!(
            err,
            "users.acl:2: Error in applying operation '+bogus': Unknown command or category \
             name in ACL. users.acl:3 should start with user keyword followed by the \
             username. WARNING: ACL errors detected, no change to the previously active ACL \
             rules was performed"
        );
        let err = parse("user a on\nuser a off\n", "f", false).unwrap_err();
        assert!(
            err.starts_with("WARNING: Duplicate user 'a' found on line 2. "),
            "{err}"
        );
    }

    #[test]
    fn save_then_load_is_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("users.acl");
        let users = parse(
            "user a on #2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881 \
             %R~k* &ch -@all +get (~x +set)\n",
            "f",
            false,
        )
        .unwrap();
        save(&path, &users).unwrap();
        let again = load(&path, false).unwrap();
        assert_eq!(again[0].describe(), users[0].describe());
        assert_eq!(
            again[0].describe(),
            "user a on #2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881 \
             %R~k* resetchannels &ch -@all +get (~x resetchannels -@all +set)"
        );
    }
}
