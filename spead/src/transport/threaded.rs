//! A receive worker thread handing heaps to the application through a bounded queue,
//! as spead2's ring stream does; a full queue blocks the worker and counts
//! `worker_blocked`.

use std::io;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::thread::JoinHandle;

use crate::recv::{Heap, Stats, Stream, StreamConfig};

/// Heaps from a worker thread.
#[derive(Debug)]
pub struct ThreadedReceiver {
    heaps: Receiver<Heap>,
    worker: Option<JoinHandle<io::Result<Stats>>>,
}

impl ThreadedReceiver {
    /// Starts a worker. `open` runs on the worker thread (so sources that are not
    /// `Send`, like [`super::UdpReceiver`], can be created there) and returns a pump:
    /// called repeatedly with the stream, it returns `Ok(false)` when its source ended.
    /// At most `ring_heaps` heaps wait in the queue.
    pub fn spawn<O, P>(config: StreamConfig, ring_heaps: usize, open: O) -> Self
    where
        O: FnOnce() -> io::Result<P> + Send + 'static,
        P: FnMut(&mut Stream) -> io::Result<bool>,
    {
        let (tx, rx) = sync_channel(ring_heaps);
        let worker = std::thread::spawn(move || {
            let mut pump = open()?;
            let mut stream = Stream::new(config);
            let mut more = true;
            while more && !stream.is_stopped() {
                more = pump(&mut stream)?;
                if !deliver(&mut stream, &tx) {
                    break;
                }
            }
            stream.stop();
            deliver(&mut stream, &tx);
            Ok(stream.stats())
        });
        Self {
            heaps: rx,
            worker: Some(worker),
        }
    }

    /// The next heap; `None` once the worker finished and the queue is empty.
    pub fn next_heap(&self) -> Option<Heap> {
        self.heaps.recv().ok()
    }

    /// Waits for the worker and returns its counters.
    ///
    /// # Errors
    /// The source's I/O error, or an error if the worker panicked.
    pub fn join(mut self) -> io::Result<Stats> {
        // Drain so a worker blocked on a full queue can finish.
        while self.heaps.try_recv().is_ok() {}
        let worker = self.worker.take();
        drop(self.heaps);
        match worker.map(JoinHandle::join) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(io::Error::other("receive worker panicked")),
            None => Err(io::Error::other("receive worker already joined")),
        }
    }
}

/// Moves finished heaps into the queue, counting each time it was full. Returns false
/// when the application hung up.
fn deliver(stream: &mut Stream, tx: &SyncSender<Heap>) -> bool {
    deliver_with(stream, tx, || {})
}

/// [`deliver`], calling `on_full` each time the queue was full (before blocking).
fn deliver_with(stream: &mut Stream, tx: &SyncSender<Heap>, mut on_full: impl FnMut()) -> bool {
    while let Some(heap) = stream.pop_heap() {
        match tx.try_send(heap) {
            Ok(()) => {}
            Err(TrySendError::Full(heap)) => {
                stream.stats_mut().worker_blocked += 1;
                on_full();
                if tx.send(heap).is_err() {
                    return false;
                }
            }
            Err(TrySendError::Disconnected(_)) => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::send::{heap_to_bytes, Heap as SendHeap};
    use crate::wire::Flavour;

    fn bytes(n: u64) -> Vec<u8> {
        let mut out = Vec::new();
        for cnt in 1..=n {
            let mut h = SendHeap::new(Flavour::SPEAD_64_40);
            h.add_item(0x1000, vec![cnt as u8; 3000], false);
            out.extend(heap_to_bytes(&h, cnt, 1472).unwrap());
        }
        out
    }

    #[test]
    fn full_queue_counts_worker_blocked() {
        // A rendezvous queue with nobody receiving yet is full: the first delivery
        // must block. The consumer starts only once told the worker blocked.
        let (tx, rx) = sync_channel::<Heap>(0);
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let consumer = std::thread::spawn(move || {
            go_rx.recv().unwrap();
            (0..3).map(|_| rx.recv().unwrap().cnt).collect::<Vec<u64>>()
        });
        let mut stream = Stream::new(StreamConfig::default());
        stream.add_buffer(&bytes(3));
        assert!(deliver_with(&mut stream, &tx, || {
            let _ = go_tx.send(());
        }));
        assert_eq!(consumer.join().unwrap(), vec![1, 2, 3]);
        assert!(stream.stats().worker_blocked >= 1);
    }

    #[test]
    fn worker_delivers_everything() {
        let data = bytes(5);
        let r = ThreadedReceiver::spawn(StreamConfig::default(), 2, move || {
            let mut done = false;
            Ok(move |s: &mut Stream| {
                if !done {
                    s.add_buffer(&data);
                    done = true;
                }
                Ok(false)
            })
        });
        let mut cnts = Vec::new();
        while let Some(h) = r.next_heap() {
            cnts.push(h.cnt);
        }
        assert_eq!(cnts, vec![1, 2, 3, 4, 5]);
        assert_eq!(r.join().unwrap().heaps, 5);
    }
}
