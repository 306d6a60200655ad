//! The emulator in a process of its own, as the service is to docpipe (a folder of its own:
//! cargo does not take it for a bench).

use std::time::{Duration, Instant};

/// The emulator serving `data_file` on a free port of 127.0.0.1: the process (to kill) and
/// its address, once it accepts connections.
pub fn start(data_file: &std::path::Path) -> (std::process::Child, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_docpipe"))
        .args(["-q", "emulate", "--addr", &addr, "--data"])
        .arg(data_file)
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("start the emulator");
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(&addr).is_err() {
        assert!(Instant::now() < deadline, "the emulator did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    (child, addr)
}
