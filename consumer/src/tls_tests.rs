//! The client's TLS against an in-process rustls server with certificates made here (rcgen):
//! the broker's name checked or not (`ssl.endpoint.identification.algorithm`), an untrusted CA
//! refused, and a client certificate sent (mTLS) or its absence reported as a TLS error.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair, KeyUsagePurpose};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::WebPkiClientVerifier;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::config::{AdminConfig, ClientConfig, ConfigError, NetConfig};
use crate::connection::transport::{open, tls_error, Transport};
use crate::connection::BrokerConnection;
use crate::NetError;

struct Ca {
    cert: rcgen::Certificate,
    key: KeyPair,
}

impl Ca {
    fn new(name: &str) -> Ca {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        Ca {
            cert: params.self_signed(&key).unwrap(),
            key,
        }
    }

    /// A leaf certificate for `names`, and its key.
    fn issue(&self, names: &[&str]) -> (rcgen::Certificate, KeyPair) {
        let key = KeyPair::generate().unwrap();
        let params =
            CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .unwrap();
        (params.signed_by(&key, &self.cert, &self.key).unwrap(), key)
    }
}

fn der_key(key: &KeyPair) -> PrivateKeyDer<'static> {
    PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()))
}

/// A TLS server on 127.0.0.1 with a certificate for `names`, requiring a client certificate of
/// `client_ca` if given. It serves one connection: after the handshake it sends `hello` and
/// reports the client certificate it got (or the handshake's error).
async fn server(
    ca: &Ca,
    names: &[&str],
    client_ca: Option<&Ca>,
) -> (
    u16,
    tokio::task::JoinHandle<Result<Option<CertificateDer<'static>>, String>>,
) {
    let (cert, key) = ca.issue(names);
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap();
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(client_ca) => {
            let mut roots = rustls::RootCertStore::empty();
            roots.add(client_ca.cert.der().clone()).unwrap();
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .unwrap();
            builder.with_client_cert_verifier(verifier)
        }
    };
    let config = builder
        .with_single_cert(
            vec![cert.der().clone(), ca.cert.der().clone()],
            der_key(&key),
        )
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let task = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let mut tls = acceptor.accept(tcp).await.map_err(|e| e.to_string())?;
        let peer = tls
            .get_ref()
            .1
            .peer_certificates()
            .and_then(|c| c.first().cloned());
        tls.write_all(b"hello").await.map_err(|e| e.to_string())?;
        tls.flush().await.map_err(|e| e.to_string())?;
        Ok(peer)
    });
    (port, task)
}

fn net(props: &[(&str, &str)]) -> Result<NetConfig, ConfigError> {
    let mut config = ClientConfig::new().with("bootstrap.servers", "localhost:1");
    config.set("security.protocol", "SSL");
    for (k, v) in props {
        config.set(*k, *v);
    }
    AdminConfig::from_config(&config).map(|c| c.net)
}

/// Opens `addr` with `net`, then reads what the server says first.
async fn talk(addr: &str, net: &NetConfig) -> Result<Vec<u8>, NetError> {
    let Transport::Tls(mut stream) = open(addr, net).await? else {
        panic!("not TLS");
    };
    let mut buf = vec![0; 5];
    match stream.read_exact(&mut buf).await {
        Ok(_) => Ok(buf),
        Err(e) => Err(
            tls_error(addr, &e).unwrap_or_else(|| NetError::Disconnected {
                addr: format!("{addr}: {e}"),
            }),
        ),
    }
}

#[tokio::test]
async fn the_brokers_name_is_checked_unless_turned_off() {
    let ca = Ca::new("test CA");
    let ca_pem = ca.cert.pem();
    let trusting = net(&[("ssl.truststore.certificates", &ca_pem)]).unwrap();

    let (port, served) = server(&ca, &["localhost"], None).await;
    let got = talk(&format!("localhost:{port}"), &trusting).await.unwrap();
    assert_eq!(got, b"hello");
    assert_eq!(
        served.await.unwrap().unwrap(),
        None,
        "no client certificate"
    );

    // The certificate names localhost, not 127.0.0.1.
    let (port, _served) = server(&ca, &["localhost"], None).await;
    let e = talk(&format!("127.0.0.1:{port}"), &trusting)
        .await
        .unwrap_err();
    assert!(
        matches!(&e, NetError::Tls { reason, .. } if reason.contains("not valid for name")),
        "{e:?}"
    );
    assert!(!e.is_retriable());

    // ssl.endpoint.identification.algorithm= (empty): the name is not checked...
    let lenient = net(&[
        ("ssl.truststore.certificates", &ca_pem),
        ("ssl.endpoint.identification.algorithm", ""),
    ])
    .unwrap();
    let (port, _served) = server(&ca, &["localhost"], None).await;
    let got = talk(&format!("127.0.0.1:{port}"), &lenient).await.unwrap();
    assert_eq!(got, b"hello");

    // ... but the chain still is: another CA's certificate is refused.
    let other = Ca::new("another CA");
    let (port, _served) = server(&other, &["localhost"], None).await;
    let e = talk(&format!("127.0.0.1:{port}"), &lenient)
        .await
        .unwrap_err();
    assert!(
        matches!(&e, NetError::Tls { reason, .. } if reason.contains("UnknownIssuer")),
        "{e:?}"
    );
}

#[tokio::test]
async fn a_client_certificate_is_sent_from_a_keystore() {
    let ca = Ca::new("test CA");
    let client_ca = Ca::new("client CA");
    let (client_cert, client_key) = client_ca.issue(&["client.example"]);
    let dir = tempfile::tempdir().unwrap();
    let truststore = dir.path().join("ca.pem");
    std::fs::write(&truststore, ca.cert.pem()).unwrap();
    // One PEM file: the key, then the chain (Kafka's PEM keystore file).
    let keystore = dir.path().join("client.pem");
    std::fs::write(
        &keystore,
        format!(
            "{}{}{}",
            client_key.serialize_pem(),
            client_cert.pem(),
            client_ca.cert.pem()
        ),
    )
    .unwrap();
    let truststore = truststore.display().to_string();
    let keystore = keystore.display().to_string();

    let with_cert = net(&[
        ("ssl.truststore.location", &truststore),
        ("ssl.keystore.type", "PEM"),
        ("ssl.keystore.location", &keystore),
    ])
    .unwrap();
    let (port, served) = server(&ca, &["localhost"], Some(&client_ca)).await;
    let got = talk(&format!("localhost:{port}"), &with_cert)
        .await
        .unwrap();
    assert_eq!(got, b"hello");
    assert_eq!(
        served.await.unwrap().unwrap().as_ref(),
        Some(client_cert.der()),
        "the server got our certificate"
    );

    // The inline form (the key and the chain apart) sends the same certificate.
    let inline = net(&[
        ("ssl.truststore.location", &truststore),
        (
            "ssl.keystore.certificate.chain",
            &format!("{}{}", client_cert.pem(), client_ca.cert.pem()),
        ),
        ("ssl.keystore.key", &client_key.serialize_pem()),
    ])
    .unwrap();
    let (port, served) = server(&ca, &["localhost"], Some(&client_ca)).await;
    talk(&format!("localhost:{port}"), &inline).await.unwrap();
    assert_eq!(
        served.await.unwrap().unwrap().as_ref(),
        Some(client_cert.der())
    );

    // Without one, the server refuses us: a TLS error (in TLS 1.3 it comes after the
    // handshake, on the first read: the connection's reader reports it to the ApiVersions
    // request waiting).
    let without = net(&[("ssl.truststore.location", &truststore)]).unwrap();
    let (port, served) = server(&ca, &["localhost"], Some(&client_ca)).await;
    let e = BrokerConnection::connect(&format!("localhost:{port}"), &without)
        .await
        .unwrap_err();
    assert!(
        matches!(&e, NetError::Tls { reason, .. } if reason.contains("CertificateRequired")),
        "{e:?}"
    );
    assert!(served.await.unwrap().is_err(), "the server refused");
}

#[test]
fn bad_keystores_are_config_errors() {
    let ca = Ca::new("test CA");
    let ca_pem = ca.cert.pem();
    let (cert, key) = ca.issue(&["client.example"]);
    let other_key = KeyPair::generate().unwrap();
    let refused = |props: &[(&str, &str)]| {
        let mut all = vec![("ssl.truststore.certificates", ca_pem.as_str())];
        all.extend_from_slice(props);
        net(&all).unwrap_err()
    };
    // A chain without its key, a key that is not the certificate's, an encrypted key.
    assert!(matches!(
        refused(&[("ssl.keystore.certificate.chain", &cert.pem())]),
        ConfigError::Security { .. }
    ));
    let e = refused(&[
        ("ssl.keystore.certificate.chain", &cert.pem()),
        ("ssl.keystore.key", &other_key.serialize_pem()),
    ]);
    assert!(e.to_string().contains("do not go together"), "{e}");
    let e = refused(&[
        ("ssl.keystore.certificate.chain", &cert.pem()),
        (
            "ssl.keystore.key",
            "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n",
        ),
    ]);
    assert!(
        e.to_string().contains("encrypted keys are not supported"),
        "{e}"
    );
    // Not PEM at all; a JKS store.
    assert!(matches!(
        net(&[("ssl.truststore.certificates", "not a certificate")]).unwrap_err(),
        ConfigError::Security { .. }
    ));
    assert!(matches!(
        refused(&[("ssl.truststore.type", "JKS")]),
        ConfigError::Invalid {
            name: "ssl.truststore.type",
            ..
        }
    ));
    // The key never shows in an error or a Debug print of the configuration.
    let good = net(&[
        ("ssl.truststore.certificates", &ca_pem),
        ("ssl.keystore.certificate.chain", &cert.pem()),
        ("ssl.keystore.key", &key.serialize_pem()),
    ])
    .unwrap();
    let printed = format!("{good:?}");
    let key_body: String = key.serialize_pem().lines().nth(1).unwrap().to_string();
    assert!(!printed.contains(&key_body), "{printed}");
}
