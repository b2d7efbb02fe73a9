//! Helpers for spead2 interoperability tests.
//!
//! spead2 (4.5.1, from PyPI) is installed on first use into a virtual environment at
//! `target/spead2-venv`; `tests/py/spead2_tool.py` drives it. Heaps are described once
//! as [`HeapSpec`]s, which both our packetizer and spead2's turn into packets.

use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use serde::Serialize;
use spead::descriptor::Descriptor;
use spead::json::{heap_json, HeapJson};
use spead::recv::{Stream, StreamConfig};
use spead::send::{heap_to_bytes, Heap};
use spead::wire::{Flavour, DESCRIPTOR_ID};

/// The spead2 version the tests are written against.
pub const SPEAD2_VERSION: &str = "4.5.1";

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"))
}

/// The helper script.
pub fn tool_script() -> PathBuf {
    workspace_root().join("tests/py/spead2_tool.py")
}

/// True if `python` runs `code` without error.
fn python_runs(python: &Path, code: &str) -> bool {
    Command::new(python)
        .args(["-c", code])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn has_spead2(python: &Path) -> bool {
    python_runs(python, "import spead2, numpy; assert spead2.__version__")
}

/// Runs an installer, panicking with its stderr if it fails.
fn run_installer(cmd: &mut Command) {
    let out = cmd.output().expect("spawn installer");
    assert!(
        out.status.success(),
        "installing for the spead2 tests failed ({cmd:?}): {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn install(venv: &Path, python: &Path) {
    if !python.exists() {
        run_installer(Command::new("python3").arg("-m").arg("venv").arg(venv));
    }
    run_installer(Command::new(python).args([
        "-m",
        "pip",
        "install",
        "--quiet",
        &format!("spead2=={SPEAD2_VERSION}"),
        "numpy",
    ]));
}

/// Makes `ready()` true by running `install` once, whatever the number of test binaries
/// trying at the same time: they take turns through a lock file in `target/` (a lock
/// older than ten minutes is taken as left by a killed run).
fn installed_once(lock_name: &str, ready: impl Fn() -> bool, install: impl FnOnce()) {
    if ready() {
        return;
    }
    std::fs::create_dir_all(target_dir()).expect("target dir");
    let lock = target_dir().join(lock_name);
    let mut waited = 0;
    loop {
        match OpenOptions::new().write(true).create_new(true).open(&lock) {
            Ok(_) => break,
            Err(_) if waited < 600 => {
                std::thread::sleep(Duration::from_secs(1));
                waited += 1;
                if ready() {
                    return;
                }
            }
            // A stale lock from a killed run: take over.
            Err(_) => break,
        }
    }
    if !ready() {
        install();
    }
    let _ = std::fs::remove_file(&lock);
}

/// Python of the venv with spead2, creating it on first use. Test binaries running at
/// once serialise the installation through a lock file.
pub fn python() -> PathBuf {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON
        .get_or_init(|| {
            let venv = target_dir().join("spead2-venv");
            let python = venv.join("bin/python");
            installed_once(
                "spead2-venv.lock",
                || has_spead2(&python),
                || install(&venv, &python),
            );
            python
        })
        .clone()
}

/// The SHA-256 of spead2 4.5.1's source distribution on PyPI.
const SPEAD2_SDIST_SHA256: &str =
    "699f18f749f71875733b759038984628af8f6088042da77f34203f8d28046b1f";

/// pytest and the plugins spead2's own tests use, at the versions of spead2 4.5.1's
/// `requirements.txt` for Python 3.11 (`netifaces-plus` is imported as `netifaces`).
const PYTEST_PACKAGES: [&str; 4] = [
    "pytest==9.1.1",
    "pytest-asyncio==1.4.0",
    "pytest-timeout==2.4.0",
    "netifaces-plus==0.12.5",
];

/// spead2's own test suite: the folder holding the `tests/` of spead2's source
/// distribution (version [`SPEAD2_VERSION`], checked against its SHA-256) with its
/// `pyproject.toml`, and a Python with spead2 and pytest (and the plugins its tests use)
/// to run it. Both are fetched on first use into `target/` (`tests/py/spead2_sdist.py`
/// downloads from the index pip uses).
pub fn upstream_suite() -> (PathBuf, PathBuf) {
    static SUITE: OnceLock<PathBuf> = OnceLock::new();
    let python = python();
    let dir = SUITE
        .get_or_init(|| {
            installed_once(
                "spead2-pytest.lock",
                || {
                    python_runs(
                        &python,
                        "import pytest, pytest_asyncio, pytest_timeout, netifaces",
                    )
                },
                || {
                    let mut c = Command::new(&python);
                    c.args(["-m", "pip", "install", "--quiet"])
                        .args(PYTEST_PACKAGES);
                    run_installer(&mut c);
                },
            );
            let dir = target_dir().join(format!("spead2-{SPEAD2_VERSION}-suite"));
            installed_once(
                "spead2-suite.lock",
                || dir.join("tests/test_passthrough.py").is_file(),
                || {
                    run_installer(
                        Command::new(&python)
                            .arg(workspace_root().join("tests/py/spead2_sdist.py"))
                            .args([SPEAD2_VERSION, SPEAD2_SDIST_SHA256])
                            .arg(&dir),
                    );
                },
            );
            dir
        })
        .clone();
    (python, dir)
}

/// Runs the tool with `args`, feeding `stdin`; returns stdout, panicking on failure.
pub fn run_tool(args: &[&str], stdin: &[u8]) -> String {
    let mut child = spawn_tool(args);
    {
        let mut input = child.stdin.take().expect("stdin");
        input.write_all(stdin).expect("write stdin");
    }
    let out: Output = child.wait_with_output().expect("wait");
    assert!(
        out.status.success(),
        "spead2_tool {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf8")
}

/// Runs `tests/py/SCRIPT` with `args` under spead2's Python, feeding `stdin`; returns
/// its stdout as JSON lines, panicking on failure.
pub fn run_json_script(script: &str, args: &[&str], stdin: &[u8]) -> Vec<serde_json::Value> {
    let mut child = Command::new(python())
        .arg(workspace_root().join("tests/py").join(script))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn python");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin)
        .expect("write stdin");
    let out = child.wait_with_output().expect("wait");
    assert!(
        out.status.success(),
        "{script} {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("utf8")
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect()
}

/// Starts the tool with piped stdin/stdout.
pub fn spawn_tool(args: &[&str]) -> Child {
    Command::new(python())
        .arg(tool_script())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn spead2_tool")
}

/// Starts the tool as a sender (`send-udp`, `send-tcp`) of `specs`, written to its stdin
/// (closed then).
pub fn spawn_sending_tool(args: &[&str], specs: &[HeapSpec]) -> Child {
    let mut child = spawn_tool(args);
    child
        .stdin
        .take()
        .expect("the tool's stdin")
        .write_all(&serde_json::to_vec(specs).expect("specs as JSON"))
        .expect("write the specs to the tool");
    child
}

/// Waits for a tool started by [`spawn_tool`] after reading its stderr; asserts that it
/// succeeded, showing that stderr if not.
pub fn expect_tool_success(mut child: Child) {
    let mut err = String::new();
    child
        .stderr
        .take()
        .expect("the tool's stderr")
        .read_to_string(&mut err)
        .expect("read the tool's stderr");
    let status = child.wait().expect("wait for the tool");
    assert!(status.success(), "spead2 tool failed ({status}): {err}");
}

/// The tool started as a receiver (`recv-udp`, `recv-tcp`), and the port it listens on
/// (the first line it prints).
#[derive(Debug)]
pub struct ReceivingTool {
    child: Child,
    out: BufReader<ChildStdout>,
    /// The port it receives on, on 127.0.0.1.
    pub port: u16,
}

impl ReceivingTool {
    /// Starts the tool with `args` and reads the port it prints.
    pub fn spawn(args: &[&str]) -> ReceivingTool {
        let mut child = spawn_tool(args);
        let mut out = BufReader::new(child.stdout.take().expect("the tool's stdout"));
        let mut line = String::new();
        out.read_line(&mut line).expect("the tool's port line");
        let ready: serde_json::Value = serde_json::from_str(&line).expect("port line");
        let port = ready["port"].as_u64().expect("a port") as u16;
        ReceivingTool { child, out, port }
    }

    /// Once the stream is sent: the heaps the tool received, summarized, and its stats
    /// line if it printed one; asserts the tool succeeded.
    pub fn finish(mut self) -> (Vec<HeapSummary>, Option<serde_json::Value>) {
        let mut rest = String::new();
        self.out
            .read_to_string(&mut rest)
            .expect("read the tool's output");
        assert!(self.child.wait().expect("wait for the tool").success());
        summarize_tool_output(&rest)
    }
}

/// Sends `specs` through `sender` one heap per call, each on substream 0.
pub fn send_each<S: spead::transport::PacketSink>(
    sender: &mut spead::transport::Sender<S>,
    specs: &[HeapSpec],
) {
    for spec in specs {
        let heap = spec.to_heap();
        sender
            .send_heaps(&[spead::send::HeapReference {
                heap: &heap,
                cnt: spec.cnt,
                substream: 0,
            }])
            .expect("send a heap");
    }
}

/// One step in building a heap, in order.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Op {
    /// An item from bytes.
    Item {
        /// ID.
        id: u64,
        /// Bytes (hex).
        hex: String,
        /// May be sent as an immediate.
        allow_immediate: bool,
    },
    /// A descriptor.
    Descriptor {
        /// Described ID.
        id: u64,
        /// Name.
        name: String,
        /// Description.
        description: String,
        /// Format (code, bits); empty when `dtype` is set.
        format: Vec<(String, u64)>,
        /// Shape.
        shape: Vec<Option<u64>>,
        /// numpy dtype string (e.g. `<u2`), or empty.
        dtype: String,
    },
    /// STREAM_CTRL start.
    Start,
    /// STREAM_CTRL stop.
    End,
}

/// A heap described for both packetizers.
#[derive(Debug, Clone, Serialize)]
pub struct HeapSpec {
    /// Heap address bits.
    pub flavour: u8,
    /// HEAP_CNT.
    pub cnt: u64,
    /// Maximum packet size.
    pub packet_size: usize,
    /// Repeat pointers in every packet.
    pub repeat_pointers: bool,
    /// Steps.
    pub ops: Vec<Op>,
}

/// Python's `repr` of a tuple of ints, as spead2 writes it into numpy headers.
fn py_tuple(shape: &[Option<u64>]) -> String {
    let dims: Vec<String> = shape
        .iter()
        .map(|d| d.map_or("None".to_string(), |n| n.to_string()))
        .collect();
    match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    }
}

impl HeapSpec {
    /// The flavour.
    pub fn flavour(&self) -> Flavour {
        Flavour::new(self.flavour).expect("flavour")
    }

    /// Our heap for this spec.
    pub fn to_heap(&self) -> Heap {
        let mut heap = Heap::new(self.flavour());
        heap.repeat_pointers = self.repeat_pointers;
        for op in &self.ops {
            match op {
                Op::Item {
                    id,
                    hex,
                    allow_immediate,
                } => heap.add_item(
                    *id,
                    spead::json::from_hex(hex).expect("hex"),
                    *allow_immediate,
                ),
                Op::Descriptor {
                    id,
                    name,
                    description,
                    format,
                    shape,
                    dtype,
                } => {
                    let header = (!dtype.is_empty()).then(|| {
                        format!(
                            "{{'descr': '{dtype}', 'fortran_order': False, 'shape': {}}}",
                            py_tuple(shape)
                        )
                        .into_bytes()
                    });
                    heap.add_descriptor(&Descriptor {
                        id: *id,
                        name: name.clone().into_bytes(),
                        description: description.clone().into_bytes(),
                        format: format.iter().map(|(c, b)| (c.as_bytes()[0], *b)).collect(),
                        shape: shape.clone(),
                        dtype: header,
                    });
                }
                Op::Start => heap.add_start(),
                Op::End => heap.add_end(),
            }
        }
        heap
    }

    /// Our packet bytes for this spec.
    pub fn our_bytes(&self) -> Vec<u8> {
        heap_to_bytes(&self.to_heap(), self.cnt, self.packet_size).expect("packetize")
    }
}

/// A small deterministic PRNG (xorshift64*), so generated heaps are reproducible.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// Seeded generator.
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    /// Next value.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Value below `n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// One of `items`.
    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
}

fn bytes_hex(rng: &mut Rng, len: usize) -> String {
    let data: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
    spead::json::to_hex(&data)
}

/// `n` varied heaps: both flavours, many packet sizes, immediates, arrays,
/// descriptors, repeated pointers, empty heaps, start and stop heaps.
pub fn generate_specs(seed: u64, n: usize, packet_sizes: &[usize]) -> Vec<HeapSpec> {
    let mut rng = Rng::new(seed);
    let sizes = [
        0usize, 1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 100, 1000, 1500, 5000, 20000,
    ];
    (0..n)
        .map(|i| {
            let flavour = if i % 2 == 0 { 48 } else { 40 };
            let packet_size = rng.pick(packet_sizes);
            let mut ops = Vec::new();
            match i % 16 {
                0 => {} // empty heap
                1 => ops.push(Op::Start),
                2 => ops.push(Op::End),
                _ => {
                    for _ in 0..rng.below(7) {
                        let id = 0x1000 + rng.below(0x800);
                        match rng.below(10) {
                            0 => ops.push(Op::Descriptor {
                                id,
                                name: format!("item_{id:x}"),
                                description: "generated".to_string(),
                                format: {
                                    let (code, bits) = rng.pick(&[
                                        ("u", 8u64),
                                        ("u", 40),
                                        ("i", 16),
                                        ("i", 64),
                                        ("f", 32),
                                        ("f", 64),
                                        ("b", 8),
                                        ("c", 8),
                                    ]);
                                    vec![(code.to_string(), bits)]
                                },
                                shape: vec![Some(rng.below(10)), None],
                                dtype: String::new(),
                            }),
                            1 => ops.push(Op::Descriptor {
                                id,
                                name: format!("arr_{id:x}"),
                                description: String::new(),
                                format: vec![],
                                shape: (0..rng.below(3)).map(|_| Some(1 + rng.below(5))).collect(),
                                dtype: rng.pick(&["<u2", ">f4", "<c8", "|u1"]).to_string(),
                            }),
                            _ => {
                                let len = rng.pick(&sizes);
                                ops.push(Op::Item {
                                    id,
                                    hex: bytes_hex(&mut rng, len),
                                    allow_immediate: rng.below(2) == 0,
                                });
                            }
                        }
                    }
                    if rng.below(8) == 0 {
                        ops.push(Op::Start);
                    }
                }
            }
            let max_pointers = ((packet_size & !7) - 48) / 8;
            let repeat_pointers = rng.below(3) == 0 && ops.len() < max_pointers;
            HeapSpec {
                flavour,
                cnt: 1 + rng.below(1 << 39),
                packet_size,
                repeat_pointers,
                ops,
            }
        })
        .collect()
}

/// spead2's BytesStream output for each spec.
pub fn spead2_bytes(specs: &[HeapSpec]) -> Vec<Vec<u8>> {
    let input = serde_json::to_vec(specs).expect("json");
    run_tool(&["packetize"], &input)
        .lines()
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).expect("json line");
            spead::json::from_hex(v["hex"].as_str().expect("hex")).expect("hex")
        })
        .collect()
}

/// Heaps (as JSON) that our receiver assembles from back-to-back packets.
pub fn our_receive(bytes: &[u8], config: StreamConfig) -> (Vec<HeapJson>, spead::recv::Stats) {
    let mut stream = Stream::new(config);
    stream.add_buffer(bytes);
    stream.stop();
    let mut out = Vec::new();
    while let Some(h) = stream.pop_heap() {
        out.push(heap_json(&h));
    }
    (out, stream.stats())
}

/// The comparable part of a heap: cnt and (id, hex, immediate) of each item.
pub type HeapSummary = (u64, Vec<(u64, String, Option<u64>)>);

/// Items as spead2's `get_items` lists them, from any order: without descriptor items
/// (0x05) and empty addressed items, addressed items first in the order given (for
/// heaps from spead2 or from us, which lay items out in the order they are sent, that
/// is address order), then immediates by value. spead2's own lists come out unchanged.
pub fn spead2_order(
    items: impl IntoIterator<Item = (u64, String, Option<u64>)>,
) -> Vec<(u64, String, Option<u64>)> {
    let mut items: Vec<_> = items
        .into_iter()
        .filter(|(id, hex, imm)| imm.is_some() || (*id != DESCRIPTOR_ID && !hex.is_empty()))
        .collect();
    items.sort_by_key(|(_, _, imm)| imm.map_or((0, 0), |v| (1, v)));
    items
}

/// What a receiver of `specs` must end with: our own assembly of their bytes, summarized.
pub fn our_summary(specs: &[HeapSpec]) -> Vec<HeapSummary> {
    let bytes: Vec<u8> = specs.iter().flat_map(HeapSpec::our_bytes).collect();
    summarize(&our_receive(&bytes, StreamConfig::default()).0)
}

/// Summaries of our JSON heaps, items in spead2's order ([`spead2_order`]).
pub fn summarize(heaps: &[HeapJson]) -> Vec<HeapSummary> {
    heaps
        .iter()
        .map(|h| {
            (
                h.cnt,
                spead2_order(h.items.iter().map(|i| (i.id, i.hex.clone(), i.immediate))),
            )
        })
        .collect()
}

/// Summaries of the tool's JSON lines (skipping counters and markers).
pub fn summarize_tool_output(text: &str) -> (Vec<HeapSummary>, Option<serde_json::Value>) {
    let mut heaps = Vec::new();
    let mut stats = None;
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("json line");
        if let Some(s) = v.get("stats") {
            stats = Some(s.clone());
            continue;
        }
        let Some(cnt) = v.get("cnt").and_then(|c| c.as_u64()) else {
            continue;
        };
        let items = v["items"]
            .as_array()
            .map(|a| {
                spead2_order(a.iter().map(|i| {
                    (
                        i["id"].as_u64().unwrap_or(0),
                        i["hex"].as_str().unwrap_or("").to_string(),
                        i.get("immediate").and_then(|x| x.as_u64()),
                    )
                }))
            })
            .unwrap_or_default();
        heaps.push((cnt, items));
    }
    (heaps, stats)
}

/// Generated heaps safe to stream before a final stop heap: no stop items inside, and
/// few enough items that spead2 never mixes padding with item bytes in a packet.
pub fn stream_specs(seed: u64, n: usize, packet_size: usize) -> Vec<HeapSpec> {
    let mut specs: Vec<HeapSpec> = generate_specs(seed, n, &[packet_size])
        .into_iter()
        .filter(|s| !s.ops.iter().any(|o| matches!(o, Op::End)))
        .collect();
    for (i, s) in specs.iter_mut().enumerate() {
        s.cnt = i as u64 + 1;
    }
    let last = specs.len() as u64 + 1;
    specs.push(HeapSpec {
        flavour: 48,
        cnt: last,
        packet_size,
        repeat_pointers: false,
        ops: vec![Op::End],
    });
    specs
}

/// A fresh path in the temporary directory.
pub fn temp_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("spead-test-{}-{name}", std::process::id()))
}
