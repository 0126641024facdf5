//! The HyperLogLog family (`cmd/hll.rs`, `hll/`) through the in-process harness
//! (`test_server.rs`): every reply and error text is redis-server 7.0.15's, recorded from it.

use crate::test_server::TestServer;

#[test]
fn add_count_merge_and_wrong_types() {
    TestServer::in_memory().check(
        r#"
            PFADD h a b c d => :1
            PFADD h a => :0
            PFADD h => :0
            PFCOUNT h => :4
            PFADD h2 c d e => :1
            PFCOUNT h h2 => :5
            PFMERGE m h h2 => +OK
            PFCOUNT m => :5
            PFMERGE m2 => +OK
            EXISTS m2 => :1
            PFCOUNT nokey => :0
            SET s v => +OK
            PFADD s a => -WRONGTYPE Key is not a valid HyperLogLog string value.
            PFCOUNT s => -WRONGTYPE Key is not a valid HyperLogLog string value.
            PFMERGE m s => -WRONGTYPE Key is not a valid HyperLogLog string value.
            RPUSH l a => :1
            PFCOUNT l => -WRONGTYPE Operation against a key holding the wrong kind of value
            GETRANGE h 0 3 => "HYLL"
        "#,
    );
}
