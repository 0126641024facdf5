//! Publish/subscribe (`cmd/pubsub.rs`, `pubsub.rs`) through the in-process harness
//! (`test_server.rs`): messages arrive on the subscriber's connection as a TCP client
//! receives them, RESP2 arrays or RESP3 pushes. Every reply and error text is
//! redis-server 7.0.15's, recorded from it.

use crate::test_server::TestServer;

#[test]
fn resp2_subscribers_get_messages_and_only_subscriber_commands() {
    let mut t = TestServer::in_memory();
    let mut b = t.conn();
    assert_eq!(b.q("SUBSCRIBE ch1 ch2"), r#"["subscribe", "ch1", :1]"#);
    assert_eq!(b.recv().to_string(), r#"["subscribe", "ch2", :2]"#);
    assert_eq!(b.q("PSUBSCRIBE ch*"), r#"["psubscribe", "ch*", :3]"#);
    assert_eq!(t.q("PUBLISH ch1 hello"), ":2");
    assert_eq!(b.recv().to_string(), r#"["message", "ch1", "hello"]"#);
    assert_eq!(
        b.recv().to_string(),
        r#"["pmessage", "ch*", "ch1", "hello"]"#
    );
    t.check(
        r#"
        PUBLISH other x => :0
        PUBSUB NUMSUB ch1 ch3 => ["ch1", :1, "ch3", :0]
        PUBSUB NUMPAT => :1
        (sorted) PUBSUB CHANNELS => ["ch1", "ch2"]
        PUBLISH => -ERR wrong number of arguments for 'publish' command
        "#,
    );
    b.check(
        r#"
        GET k => -ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context
        PING => ["pong", ""]
        PING hi => ["pong", "hi"]
        UNSUBSCRIBE ch1 => ["unsubscribe", "ch1", :2]
        UNSUBSCRIBE ch2 => ["unsubscribe", "ch2", :1]
        PUNSUBSCRIBE => ["punsubscribe", "ch*", :0]
        GET k => (nil)
        "#,
    );
}

#[test]
fn resp3_subscribers_get_pushes_and_run_any_command() {
    let mut t = TestServer::in_memory();
    let mut b = t.conn();
    assert!(b.q("HELLO 3").starts_with('{'));
    b.check(
        r#"
        SUBSCRIBE c => >["subscribe", "c", :1]
        GET k => _
        "#,
    );
    assert_eq!(t.q("PUBLISH c m"), ":1");
    assert_eq!(b.recv().to_string(), r#">["message", "c", "m"]"#);
    b.check(
        r#"
        PING => +PONG
        UNSUBSCRIBE c => >["unsubscribe", "c", :0]
        SSUBSCRIBE sh => >["ssubscribe", "sh", :1]
        "#,
    );
    assert_eq!(t.q("SPUBLISH sh m"), ":1");
    assert_eq!(b.recv().to_string(), r#">["smessage", "sh", "m"]"#);
}
