//! Lua scripts (`cmd/scripting.rs`, `scripting/`) through the in-process harness
//! (`test_server.rs`): scripts on one shard's keys run on its worker, the others (keys in
//! both shards, a key the script did not declare) on the connection's thread. Every reply
//! and error text is redis-server 7.0.15's, recorded from it.

use crate::test_server::TestServer;

#[test]
fn replies_errors_and_keys_wherever_the_script_runs() {
    TestServer::in_memory().check(
        r#"
            EVAL "return 1" 0 => :1
            EVAL "return {1, 'a', {2}}" 0 => [:1, "a", [:2]]
            EVAL "return redis.call('SET', KEYS[1], ARGV[1])" 1 k v => +OK
            EVAL "return redis.call('GET', KEYS[1])" 1 k => "v"
            EVAL "return redis.call('LPUSH', KEYS[1], 'x')" 1 k => -WRONGTYPE Operation against a key holding the wrong kind of value script: c0f4e07d13acc8c1c810243d737b96cf873d836e, on @user_script:1.
            EVAL "return redis.pcall('LPUSH', KEYS[1], 'x')" 1 k => -WRONGTYPE Operation against a key holding the wrong kind of value
            EVAL "return redis.call('nosuch')" 0 => -ERR Unknown Redis command called from script script: 206396248e12c6e742fd7296250433c8d7343b74, on @user_script:1.
            EVAL "return {err='custom'}" 0 => -custom
            EVAL "return redis.status_reply('FINE')" 0 => +FINE
            EVAL "return 3.99" 0 => :3
            EVAL "return true" 0 => :1
            EVAL "return false" 0 => (nil)
            EVAL "return nil" 0 => (nil)
            EVAL "return" 0 => (nil)
            EVAL "syntax error here" 0 => -ERR Error compiling script (new function): user_script:1: '=' expected near 'error'
            EVAL "return 1" -1 => -ERR Number of keys can't be negative
            EVAL "return 1" 2 a => -ERR Number of keys can't be greater than number of args
            EVAL "return KEYS[1] .. ARGV[1]" 1 a b => "ab"
            EVALSHA e0e1f9fabfc9d4800c877a703b823ac0578ff8db 0 => :1
            SCRIPT LOAD "return 1" => "e0e1f9fabfc9d4800c877a703b823ac0578ff8db"
            EVALSHA e0e1f9fabfc9d4800c877a703b823ac0578ff8db 0 => :1
            SCRIPT EXISTS e0e1f9fabfc9d4800c877a703b823ac0578ff8db ffffffffffffffffffffffffffffffffffffffff => [:1, :0]
            EVAL_RO "return redis.call('SET', 'a', 'b')" 0 => -ERR Write commands are not allowed from read-only scripts. script: e6fbbd6637fe61f548c8b03624d216fd7fb9dfd0, on @user_script:1.
            EVAL "redis.call('SET', KEYS[1], 'a'); redis.call('INCR', KEYS[1])" 1 s => -ERR value is not an integer or out of range script: bb1c8f7edf8045db0b0d56263a97ff28e4aa0a0e, on @user_script:1.
            GET s => "a"
            EVAL "return redis.call('INCRBY', KEYS[1], 5)" 1 n => :5
            EVAL "return cjson.encode({1,2})" 0 => "[1,2]"
            EVAL "return redis.sha1hex('')" 0 => "da39a3ee5e6b4b0d3255bfef95601890afd80709"
            EVAL "redis.call('SET', KEYS[1], 1); return redis.call('MGET', KEYS[1], KEYS[2])" 2 a b => ["1", (nil)]
            EVAL "redis.call('SET', 'undeclared', 7); return redis.call('GET', KEYS[1])" 1 a => "1"
            GET undeclared => "7"
            EVAL "return redis.call('BLPOP', 'nolist', 0)" 0 => -ERR This Redis command is not allowed from script script: b6687e6a85d650adffa2169b7bb060397e4c619f, on @user_script:1.
        "#,
    );
}
