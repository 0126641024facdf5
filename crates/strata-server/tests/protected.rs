//! MODULE, DEBUG and BGREWRITEAOF over TCP: the replies redis-server 7.0.15 gives with its
//! default `enable-module-command no` and `enable-debug-command no`.

mod common;

use common::{start, Client, V};

fn not_allowed(what: &str, option: &str) -> V {
    V::err(&format!(
        "ERR {what} command not allowed. If the {option} option is set to \"local\", you can \
         run it from a local connection, otherwise you need to set this option in the \
         configuration file, and then restart the server."
    ))
}

#[test]
fn module_and_debug_answer_as_a_server_without_them() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    assert_eq!(c.q(&["MODULE", "LIST"]), V::Array(vec![]));
    for args in [
        &["MODULE", "LOAD", "/nonexistent.so"][..],
        &["MODULE", "LOADEX", "/nonexistent.so"],
        &["module", "unload", "foo"],
    ] {
        assert_eq!(
            c.q(args),
            not_allowed("MODULE", "enable-module-command"),
            "{args:?}"
        );
    }
    assert_eq!(
        c.q(&["MODULE", "LOAD"]),
        V::err("ERR wrong number of arguments for 'module|load' command")
    );
    assert_eq!(
        c.q(&["MODULE", "foo"]),
        V::err("ERR unknown subcommand 'foo'. Try MODULE HELP.")
    );
    match c.q(&["MODULE", "HELP"]) {
        V::Array(lines) => {
            assert_eq!(lines.len(), 11);
            assert_eq!(
                lines[0],
                V::Simple("MODULE <subcommand> [<arg> [value] [opt] ...]. Subcommands are:".into())
            );
        }
        other => panic!("MODULE HELP: {other:?}"),
    }
    assert_eq!(
        c.q(&["DEBUG", "OBJECT", "x"]),
        not_allowed("DEBUG", "enable-debug-command")
    );
    assert_eq!(
        c.q(&["DEBUG"]),
        V::err("ERR wrong number of arguments for 'debug' command")
    );
}

#[test]
fn bgrewriteaof_syncs_and_answers_as_a_started_rewrite() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(dir.path(), &[]);
    let mut c = Client::connect(s.local_addr());
    c.q(&["SET", "k", "v"]);
    assert_eq!(
        c.q(&["BGREWRITEAOF"]),
        V::Simple("Background append only file rewriting started".into())
    );
    assert_eq!(c.q(&["GET", "k"]), V::bulk("v"));
}
