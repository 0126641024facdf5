//! Whole messages out of a bus connection's byte stream, as Redis's `clusterReadHandler`
//! frames them: read 8 bytes; check the signature and that `totlen` covers at least the
//! header before waiting for more (a failure means the peer is not speaking the bus, and
//! the link is to be closed); then read the rest of the message.
//!
//! Redis puts no upper bound on `totlen`; a reader here has one ([`FrameReader::new`]), and
//! buffers only bytes that arrived: `totlen` is never an allocation size. A message that
//! frames but does not decode ([`super::decode`]) is dropped by Redis and the link kept.

use super::header::{HEADER_LEN, SIGNATURE};
use super::BusError;
use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt};

/// The default limit on one message: the header, PUBLISH's two lengths, and a channel and
/// a message of Redis's default `proto-max-bulk-len` (512 MiB) each, the largest message a
/// redis-server sends with default limits.
pub const DEFAULT_MAX_MESSAGE_BYTES: u32 = HEADER_LEN as u32 + 8 + 2 * 512 * 1024 * 1024;

/// Bytes read at most per read call (Redis reads up to one `clusterMsg`, 4352 bytes).
const READ_CHUNK: usize = 64 * 1024;

/// Accumulates a connection's bytes and yields whole messages. After an error the stream
/// is out of step for good: every later call returns the same error.
#[derive(Debug)]
pub struct FrameReader {
    buf: BytesMut,
    max_message_bytes: u32,
    failed: Option<BusError>,
}

impl FrameReader {
    /// A reader refusing messages longer than `max_message_bytes` (at least the header).
    pub fn new(max_message_bytes: u32) -> FrameReader {
        FrameReader {
            buf: BytesMut::new(),
            max_message_bytes: max_message_bytes.max(HEADER_LEN as u32),
            failed: None,
        }
    }

    /// Adds bytes received from the connection.
    pub fn feed(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// Bytes buffered and not yet returned.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// How many more bytes complete the message at the front: up to 8 while its length is
    /// unknown, then the rest of it; 0 if a whole message is buffered (or after an error).
    pub fn wanted(&self) -> usize {
        if self.failed.is_some() {
            return 0;
        }
        match self.front_len() {
            None => 8 - self.buf.len(),
            Some(total) => total.saturating_sub(self.buf.len()),
        }
    }

    fn front_len(&self) -> Option<usize> {
        let b = self.buf.get(..8)?;
        Some(u32::from_be_bytes([b[4], b[5], b[6], b[7]]) as usize)
    }

    /// The next whole message, `None` if more bytes are needed, or an error if the stream
    /// is not a bus stream (bad signature, `totlen` below the header or above the limit).
    pub fn next_frame(&mut self) -> Result<Option<Bytes>, BusError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let Some(b) = self.buf.get(..8) else {
            return Ok(None);
        };
        let sig = [b[0], b[1], b[2], b[3]];
        let totlen = u32::from_be_bytes([b[4], b[5], b[6], b[7]]);
        let bad = if sig != SIGNATURE {
            Some(BusError::Signature { found: sig })
        } else if (totlen as usize) < HEADER_LEN {
            Some(BusError::TotlenBelowHeader {
                totlen,
                min: HEADER_LEN as u32,
            })
        } else if totlen > self.max_message_bytes {
            Some(BusError::TotlenAboveLimit {
                totlen,
                max: self.max_message_bytes,
            })
        } else {
            None
        };
        if let Some(e) = bad {
            self.failed = Some(e.clone());
            self.buf.clear();
            return Err(e);
        }
        if self.buf.len() < totlen as usize {
            return Ok(None);
        }
        Ok(Some(self.buf.split_to(totlen as usize).freeze()))
    }

    /// Reads from `conn` until a whole message is buffered and returns it; `None` when the
    /// connection ends between messages. Each read asks for at most the rest of the
    /// current message (and 64 KiB), so the buffer never holds more than one message.
    pub async fn read_frame<R: AsyncRead + Unpin>(
        &mut self,
        conn: &mut R,
    ) -> Result<Option<Bytes>, BusError> {
        loop {
            if let Some(frame) = self.next_frame()? {
                return Ok(Some(frame));
            }
            let want = self.wanted().clamp(1, READ_CHUNK);
            let start = self.buf.len();
            self.buf.resize(start + want, 0);
            let got = conn.read(&mut self.buf[start..]).await;
            let n = match got {
                Ok(n) => n,
                Err(e) => {
                    self.buf.truncate(start);
                    return Err(BusError::Io(e.to_string()));
                }
            };
            self.buf.truncate(start + n);
            if n == 0 {
                if self.buf.is_empty() {
                    return Ok(None);
                }
                return Err(BusError::Io(format!(
                    "connection closed after {} bytes of a message",
                    self.buf.len()
                )));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::bus::header::{Header, NodeName};
    use crate::cluster::bus::message::{encode, Body, Msg, Publish};

    fn publish(n: usize) -> Vec<u8> {
        let body = Body::Publish(Publish {
            channel: b"ch".to_vec(),
            message: vec![b'm'; n],
        });
        encode(&Msg::new(Header::new(NodeName([b'a'; 40])), body))
    }

    #[test]
    fn frames_split_at_any_byte() {
        let msgs = [publish(0), publish(5), publish(70_000)];
        let stream: Vec<u8> = msgs.concat();
        for step in [1, 7, 8, 9, 2256, 4096, stream.len()] {
            let mut r = FrameReader::new(DEFAULT_MAX_MESSAGE_BYTES);
            let mut out = Vec::new();
            for chunk in stream.chunks(step) {
                r.feed(chunk);
                while let Some(f) = r.next_frame().unwrap() {
                    out.push(f.to_vec());
                }
            }
            assert_eq!(out, msgs.to_vec(), "step {step}");
            assert_eq!(r.buffered(), 0);
            assert_eq!(r.wanted(), 8);
        }
    }

    #[test]
    fn wanted_counts_down_the_message() {
        let m = publish(3);
        let mut r = FrameReader::new(DEFAULT_MAX_MESSAGE_BYTES);
        assert_eq!(r.wanted(), 8);
        r.feed(&m[..5]);
        assert_eq!(r.wanted(), 3);
        r.feed(&m[5..100]);
        assert_eq!(r.wanted(), m.len() - 100);
        r.feed(&m[100..]);
        assert_eq!(r.wanted(), 0);
        assert_eq!(r.next_frame().unwrap().as_deref(), Some(&m[..]));
    }

    #[test]
    fn bad_start_is_refused_after_eight_bytes_and_stays_refused() {
        let mut r = FrameReader::new(DEFAULT_MAX_MESSAGE_BYTES);
        r.feed(b"RCmX\0\0\x10\0");
        assert_eq!(r.next_frame(), Err(BusError::Signature { found: *b"RCmX" }));
        r.feed(&publish(1));
        assert!(r.next_frame().is_err());
        assert_eq!(r.wanted(), 0);

        let mut r = FrameReader::new(DEFAULT_MAX_MESSAGE_BYTES);
        r.feed(b"RCmb\0\0\x08\xcf");
        assert_eq!(
            r.next_frame(),
            Err(BusError::TotlenBelowHeader {
                totlen: 2255,
                min: 2256
            })
        );

        let mut r = FrameReader::new(10_000);
        r.feed(b"RCmb\xff\xff\xff\xff");
        assert_eq!(
            r.next_frame(),
            Err(BusError::TotlenAboveLimit {
                totlen: u32::MAX,
                max: 10_000
            })
        );
        // Seven bytes are not enough to judge.
        let mut r = FrameReader::new(10_000);
        r.feed(b"XXXXXXX");
        assert_eq!(r.next_frame(), Ok(None));
    }

    #[test]
    fn read_frame_from_an_async_stream() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let msgs = [publish(1), publish(100_000), publish(2)];
            let (mut a, mut b) = tokio::io::duplex(1000);
            let stream = msgs.concat();
            let writer = tokio::spawn(async move {
                use tokio::io::AsyncWriteExt;
                a.write_all(&stream).await.unwrap();
                a.write_all(&publish(9)[..50]).await.unwrap();
            });
            let mut r = FrameReader::new(DEFAULT_MAX_MESSAGE_BYTES);
            for m in &msgs {
                let f = r.read_frame(&mut b).await.unwrap();
                assert_eq!(f.as_deref(), Some(&m[..]));
                assert!(r.buffered() == 0);
            }
            writer.await.unwrap();
            let end = r.read_frame(&mut b).await;
            assert!(
                matches!(end, Err(BusError::Io(ref m)) if m.contains("after 50 bytes")),
                "{end:?}"
            );

            let (a, mut b) = tokio::io::duplex(10);
            drop(a);
            let mut r = FrameReader::new(DEFAULT_MAX_MESSAGE_BYTES);
            assert_eq!(r.read_frame(&mut b).await, Ok(None));
        });
    }
}
