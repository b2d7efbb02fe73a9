//! Driving the packetizer into a transport, with batching and rate limiting.

use std::io::{self, Write};
use std::time::{Duration, Instant};

use super::byte_stream::PacketWriter;
use super::udp::UdpSender;
use crate::send::{GroupMode, HeapGroup, HeapReference, RateLimiter, SendError};

/// Something packets can be written to.
pub trait PacketSink {
    /// Sends packets, each with its substream index.
    ///
    /// # Errors
    /// I/O errors.
    fn send_packets(&mut self, packets: &[(&[u8], usize)]) -> io::Result<()>;

    /// Flushes buffered packets.
    ///
    /// # Errors
    /// I/O errors.
    fn flush_packets(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl PacketSink for UdpSender {
    fn send_packets(&mut self, packets: &[(&[u8], usize)]) -> io::Result<()> {
        self.send_batch(packets)
    }
}

impl<W: Write> PacketSink for PacketWriter<W> {
    fn send_packets(&mut self, packets: &[(&[u8], usize)]) -> io::Result<()> {
        for (p, _) in packets {
            self.write_packet(p)?;
        }
        Ok(())
    }

    fn flush_packets(&mut self) -> io::Result<()> {
        self.flush()
    }
}

/// A send failure.
#[derive(Debug, thiserror::Error)]
pub enum SendIoError {
    /// The heap cannot be packetized.
    #[error(transparent)]
    Packetize(#[from] SendError),
    /// The transport failed.
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// Sends groups of heaps through a sink.
#[derive(Debug)]
pub struct Sender<S> {
    sink: S,
    max_packet_size: usize,
    batch: usize,
    limiter: RateLimiter,
    /// The wall-clock instant the limiter's nanoseconds count from.
    epoch: Instant,
    mode: GroupMode,
    buf: Vec<u8>,
    /// Packets sent.
    pub packets: u64,
    /// Bytes sent (SPEAD packets).
    pub bytes: u64,
}

impl<S: PacketSink> Sender<S> {
    /// A sender of packets up to `max_packet_size`, rate-limited by `limiter`.
    pub fn new(sink: S, max_packet_size: usize, limiter: RateLimiter, mode: GroupMode) -> Self {
        let batch = 64;
        Self {
            sink,
            max_packet_size,
            batch,
            limiter,
            epoch: Instant::now(),
            mode,
            buf: vec![0; batch * max_packet_size],
            packets: 0,
            bytes: 0,
        }
    }

    /// Wall time since the sender was made, ns (the rate limiter's clock).
    fn now_ns(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// The sink.
    pub fn sink_mut(&mut self) -> &mut S {
        &mut self.sink
    }

    /// Sends heaps (interleaved per the group mode) and waits for them to be handed to
    /// the transport.
    ///
    /// # Errors
    /// [`SendIoError`] when packetizing or I/O fails.
    pub fn send_heaps(&mut self, heaps: &[HeapReference<'_>]) -> Result<(), SendIoError> {
        let mut group = HeapGroup::new(heaps, self.max_packet_size, self.mode)?;
        // As spead2 after its queue ran empty: time spent idle is not caught up.
        self.limiter.resume(self.now_ns());
        let stride = self.max_packet_size;
        let mut meta: Vec<(usize, usize)> = Vec::with_capacity(self.batch);
        loop {
            let mut done = false;
            while meta.len() < self.batch {
                let now = self.now_ns();
                if let Some(at) = self.limiter.wait_until(now) {
                    if !meta.is_empty() {
                        break;
                    }
                    std::thread::sleep(Duration::from_nanos(at - now));
                    continue;
                }
                let i = meta.len();
                match group.next_packet(&mut self.buf[i * stride..(i + 1) * stride])? {
                    Some((len, sub)) => {
                        self.limiter.sent(len);
                        meta.push((len, sub));
                    }
                    None => {
                        done = true;
                        break;
                    }
                }
            }
            if !meta.is_empty() {
                let packets: Vec<(&[u8], usize)> = meta
                    .iter()
                    .enumerate()
                    .map(|(i, &(len, sub))| (&self.buf[i * stride..i * stride + len], sub))
                    .collect();
                self.sink.send_packets(&packets)?;
                self.packets += meta.len() as u64;
                self.bytes += meta.iter().map(|m| m.0 as u64).sum::<u64>();
                meta.clear();
            }
            if done {
                break;
            }
        }
        self.sink.flush_packets()?;
        Ok(())
    }

    /// Returns the sink.
    pub fn into_sink(self) -> S {
        self.sink
    }
}
