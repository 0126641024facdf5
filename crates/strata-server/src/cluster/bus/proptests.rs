//! Round trips of generated messages of every type: encode, decode, the same message;
//! encode again, the same bytes; and every cut of the bytes refused.

use super::ext::ext_type;
use super::header::{mflag0, IP_LEN, NAME_LEN, RESERVED_LEN};
use super::message::msg_type;
use super::*;
use proptest::collection::vec;
use proptest::prelude::*;

fn name() -> impl Strategy<Value = NodeName> {
    prop_oneof![
        Just(NodeName::NULL),
        proptest::array::uniform::<_, NAME_LEN>(any::<u8>()).prop_map(NodeName),
        "[0-9a-f]{40}".prop_map(|s| NodeName::parse(s.as_bytes()).unwrap()),
    ]
}

fn ip() -> impl Strategy<Value = IpField> {
    prop_oneof![
        Just(IpField::EMPTY),
        "[0-9.:a-f]{0,45}".prop_map(|s| IpField::new(&s)),
        vec(any::<u8>(), IP_LEN).prop_map(|v| IpField(v.try_into().unwrap())),
    ]
}

fn slots() -> impl Strategy<Value = SlotBitmap> {
    prop_oneof![
        Just(SlotBitmap::new()),
        (0u16..16384, 0u16..16384).prop_map(|(a, b)| {
            let mut s = SlotBitmap::new();
            s.set_range(a.min(b), a.max(b)).unwrap();
            s
        }),
        vec(any::<u8>(), 2048).prop_map(|v| SlotBitmap::from_bytes(&v).unwrap()),
    ]
}

fn header() -> impl Strategy<Value = Header> {
    (
        (
            any::<u16>(),
            any::<u16>(),
            any::<u64>(),
            any::<u64>(),
            any::<u64>(),
        ),
        (name(), slots(), name(), ip(), any::<u16>()),
        (
            vec(any::<u8>(), RESERVED_LEN),
            any::<u16>(),
            any::<u16>(),
            any::<u16>(),
            any::<u8>(),
            any::<[u8; 3]>(),
        ),
    )
        .prop_map(|(a, b, c)| Header {
            port: a.0,
            count: a.1,
            current_epoch: a.2,
            config_epoch: a.3,
            offset: a.4,
            sender: b.0,
            myslots: b.1,
            slaveof: b.2,
            myip: b.3,
            extensions: b.4,
            reserved: c.0.try_into().unwrap(),
            pport: c.1,
            cport: c.2,
            flags: c.3,
            state: c.4,
            mflags: c.5,
        })
}

fn gossip() -> impl Strategy<Value = Gossip> {
    (name(), any::<u32>(), any::<u32>(), ip(), any::<[u16; 5]>()).prop_map(|(n, ps, pr, ip, w)| {
        Gossip {
            nodename: n,
            ping_sent: ps,
            pong_received: pr,
            ip,
            port: w[0],
            cport: w[1],
            flags: w[2],
            pport: w[3],
            reserved: w[4],
        }
    })
}

fn ping_ext() -> impl Strategy<Value = PingExt> {
    prop_oneof![
        "[a-z0-9.-]{0,80}".prop_map(|h| PingExt::hostname(h.as_bytes()).unwrap()),
        "[a-z0-9 -]{0,30}".prop_map(|h| PingExt::human_nodename(h.as_bytes()).unwrap()),
        (name(), any::<u64>()).prop_map(|(n, t)| PingExt::forgotten_node(n, t)),
        name().prop_map(PingExt::shard_id),
        (1u16.., any::<u16>(), 0usize..6, any::<u8>()).prop_map(|(t, r, words, b)| PingExt {
            ext_type: t,
            reserved: r,
            data: vec![b; words * 8],
        }),
    ]
}

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    vec(any::<u8>(), 0..max)
}

fn ping() -> impl Strategy<Value = Ping> {
    (vec(gossip(), 0..6), vec(ping_ext(), 0..4)).prop_map(|(gossip, exts)| Ping { gossip, exts })
}

fn publish() -> impl Strategy<Value = Publish> {
    (bytes(40), bytes(300)).prop_map(|(channel, message)| Publish { channel, message })
}

fn body() -> impl Strategy<Value = Body> {
    prop_oneof![
        ping().prop_map(Body::Ping),
        ping().prop_map(Body::Pong),
        ping().prop_map(Body::Meet),
        name().prop_map(|about| Body::Fail { about }),
        publish().prop_map(Body::Publish),
        publish().prop_map(Body::PublishShard),
        Just(Body::FailoverAuthRequest),
        Just(Body::FailoverAuthAck),
        Just(Body::MfStart),
        (any::<u64>(), name(), slots()).prop_map(|(config_epoch, nodename, slots)| {
            Body::Update(Update {
                config_epoch,
                nodename,
                slots,
            })
        }),
        (any::<[u8; 8]>(), any::<u8>(), bytes(100)).prop_map(
            |(module_id, module_type, payload)| {
                Body::Module(Module {
                    module_id,
                    module_type,
                    payload,
                })
            }
        ),
        (msg_type::COUNT.., bytes(200))
            .prop_map(|(msg_type, data)| Body::Unknown { msg_type, data }),
    ]
}

/// A message as decode returns it: for PING, PONG and MEET the header's counts are the
/// body's and the extension flag is set when there are extensions.
fn message() -> impl Strategy<Value = Msg> {
    (header(), body()).prop_map(|(mut h, body)| {
        if let Body::Ping(p) | Body::Pong(p) | Body::Meet(p) = &body {
            h.count = p.gossip.len() as u16;
            h.extensions = p.exts.len() as u16;
            if !p.exts.is_empty() {
                h.mflags[0] |= mflag0::EXT_DATA;
            }
        }
        Msg::new(h, body)
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn generated_messages_round_trip(msg in message()) {
        let bytes = encode(&msg);
        let back = decode(&bytes);
        prop_assert_eq!(back.as_ref(), Ok(&msg));
        prop_assert_eq!(encode(&back.unwrap()), bytes);
    }

    #[test]
    fn generated_messages_cut_anywhere_are_refused(msg in message(), cut in any::<prop::sample::Index>()) {
        let bytes = encode(&msg);
        let len = cut.index(bytes.len());
        prop_assert!(decode(&bytes[..len]).is_err());
    }

    #[test]
    fn extension_views_read_what_was_built(h in "[a-z0-9.-]{1,100}", n in name(), ttl in any::<u64>()) {
        let e = PingExt::hostname(h.as_bytes()).unwrap();
        prop_assert_eq!(e.view(), Ok(ExtView::Hostname(h.as_bytes())));
        prop_assert_eq!(e.encoded_len() % 8, 0);
        prop_assert!(e.data.len() > h.len());
        let f = PingExt::forgotten_node(n, ttl);
        prop_assert_eq!(f.view(), Ok(ExtView::ForgottenNode { name: n, ttl_secs: ttl }));
        let s = PingExt::shard_id(n);
        prop_assert_eq!(s.ext_type, ext_type::SHARD_ID);
        prop_assert_eq!(s.view(), Ok(ExtView::ShardId(n)));
    }
}
