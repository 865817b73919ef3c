//! Throwaway TLS material for the security tests, made with the `openssl` command: a CA, a
//! broker certificate for 127.0.0.1 and localhost, and client certificates, as PEM files in a
//! temporary folder, in the layouts Kafka's PEM settings and librdkafka read.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A CA and the files signed by it; removed when dropped.
#[derive(Debug)]
pub struct Certs {
    dir: tempfile::TempDir,
}

impl Certs {
    /// A new CA and a broker certificate (`CN=localhost`, SAN IP:127.0.0.1 and DNS:localhost).
    pub fn new() -> Certs {
        let certs = Certs {
            dir: tempfile::tempdir().unwrap(),
        };
        certs.openssl(&[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "2",
            "-subj",
            "/CN=lograil test CA",
        ]);
        certs.sign(
            "broker",
            "/CN=localhost",
            Some("subjectAltName=IP:127.0.0.1,DNS:localhost"),
        );
        certs
    }

    /// The CA certificate (a truststore).
    pub fn ca(&self) -> PathBuf {
        self.path("ca.pem")
    }

    /// The broker's keystore: its key and certificate in one PEM file.
    pub fn broker_keystore(&self) -> PathBuf {
        self.path("broker.pem")
    }

    /// Makes a client certificate with `subject` (`/CN=alice/O=acme`) signed by the CA; its
    /// key, certificate and keystore (both in one file) as `<name>.key`, `<name>.crt`, `<name>.pem`.
    pub fn client(&self, name: &str, subject: &str) -> (PathBuf, PathBuf) {
        // A v3 certificate (webpki refuses v1 ones) for client authentication.
        self.sign(
            name,
            subject,
            Some("basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth"),
        );
        (
            self.path(&format!("{name}.key")),
            self.path(&format!("{name}.crt")),
        )
    }

    /// The file `name` in the temporary folder (whether or not it exists yet).
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The temporary folder holding every file; removed when the `Certs` is dropped.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    fn sign(&self, name: &str, subject: &str, extensions: Option<&str>) {
        let (key, csr, crt) = (
            format!("{name}.key"),
            format!("{name}.csr"),
            format!("{name}.crt"),
        );
        self.openssl(&[
            "req", "-newkey", "rsa:2048", "-nodes", "-keyout", &key, "-out", &csr, "-subj", subject,
        ]);
        let mut args = vec![
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            &crt,
            "-days",
            "2",
        ];
        let ext = format!("{name}.ext");
        if let Some(extensions) = extensions {
            std::fs::write(self.path(&ext), format!("{extensions}\n")).unwrap();
            args.extend(["-extfile", &ext]);
        }
        self.openssl(&args);
        let pem = [
            std::fs::read(self.path(&key)).unwrap(),
            std::fs::read(self.path(&crt)).unwrap(),
        ]
        .concat();
        std::fs::write(self.path(&format!("{name}.pem")), pem).unwrap();
    }

    fn openssl(&self, args: &[&str]) {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(self.dir.path())
            .output()
            .expect("the openssl command (apt-get install openssl; .ci/run does it)");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Default for Certs {
    fn default() -> Self {
        Certs::new()
    }
}
