//! TLS for real: `rediss://` nodes served by `redis-server --tls-port`, with a certificate
//! authority, server and client certificates made here (rcgen) and the client built with
//! the `tls-rustls` feature.
//!
//! - a lease is taken, extended and released over TLS with the fleet's CA as the only root;
//! - a `rediss://` URL given as it is (webpki roots, which do not know the test's CA) and a
//!   client that trusts another CA both fail with an error that names each node and says that
//!   its certificate was refused;
//! - with `--tls-auth-clients yes` (mutual TLS) a client without a certificate is refused,
//!   naming the node, and one with a certificate signed by the CA gets its lease.

#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

mod common;

use std::path::Path;
use std::time::Duration;

use common::*;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use redis::{ClientTlsConfig, IntoConnectionInfo, TlsCertificates};
use redlock::core::{NodeFailure, NodeStatus};
use redlock::{Error, Redlock};
use redlock_tests::{FleetOptions, RedisFleet, TlsFiles};

/// A certificate authority of the test's own.
struct Authority {
    params: CertificateParams,
    key: KeyPair,
    pem: String,
}

impl Authority {
    fn new(name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().unwrap();
        let pem = params.self_signed(&key).unwrap().pem();
        Self { params, key, pem }
    }

    /// A certificate for `names` (IP addresses become IP SANs) and its key, in PEM.
    fn issue(&self, names: &[&str], usage: ExtendedKeyUsagePurpose) -> (String, String) {
        let mut params =
            CertificateParams::new(names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>())
                .unwrap();
        params.distinguished_name.push(
            DnType::CommonName,
            names.first().copied().unwrap_or("client"),
        );
        params.extended_key_usages = vec![usage];
        let key = KeyPair::generate().unwrap();
        let issuer = Issuer::from_params(&self.params, &self.key);
        let cert = params.signed_by(&key, &issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

/// The files a TLS fleet needs, in `dir`; the server certificate names 127.0.0.1.
fn server_files(dir: &Path, ca: &Authority, require_client_certs: bool) -> TlsFiles {
    let (cert, key) = ca.issue(
        &["127.0.0.1", "localhost"],
        ExtendedKeyUsagePurpose::ServerAuth,
    );
    let files = TlsFiles {
        cert: dir.join("server.crt"),
        key: dir.join("server.key"),
        ca: dir.join("ca.crt"),
        require_client_certs,
    };
    std::fs::write(&files.cert, cert).unwrap();
    std::fs::write(&files.key, key).unwrap();
    std::fs::write(&files.ca, &ca.pem).unwrap();
    files
}

fn tls_fleet(n: usize, files: TlsFiles) -> RedisFleet {
    fleet_with(
        n,
        FleetOptions {
            tls: Some(files),
            ..FleetOptions::default()
        },
    )
}

/// A client of every node's TLS port trusting `root` alone, with `client` as its certificate
/// and key when given, and `TCP_NODELAY` as the builder sets it for URLs.
fn tls_redlock(fleet: &RedisFleet, root: &str, client: Option<(String, String)>) -> Redlock {
    let mut builder = Redlock::builder().ttl(Duration::from_secs(10));
    for index in 0..fleet.len() {
        let info = fleet.tls_url(index).into_connection_info().unwrap();
        let tcp = info.tcp_settings().clone().set_nodelay(true);
        let certificates = TlsCertificates {
            client_tls: client.clone().map(|(cert, key)| ClientTlsConfig {
                client_cert: cert.into_bytes(),
                client_key: key.into_bytes(),
            }),
            root_cert: Some(root.as_bytes().to_vec()),
        };
        let client =
            redis::Client::build_with_tls(info.set_tcp_settings(tcp), certificates).unwrap();
        builder = builder.node_client(client);
    }
    fresh(builder).build().unwrap()
}

/// The TLS address (`127.0.0.1:<tls port>`) of every node.
fn tls_addresses(fleet: &RedisFleet) -> Vec<String> {
    (0..fleet.len())
        .map(|i| fleet.tls_url(i).trim_start_matches("rediss://").to_owned())
        .collect()
}

/// Every node refused the connection with a message saying `what`, and both the connect
/// report and the acquisition's error name each failing node.
async fn assert_every_node_refused(redlock: &Redlock, fleet: &RedisFleet, what: &str) {
    let report = redlock.connect().await;
    assert_eq!(report.connected(), 0, "{report}");
    let text = report.to_string();
    for (address, status) in &report.nodes {
        assert!(text.contains(&**address), "{address} not named in: {text}");
        match status {
            Err(NodeFailure::Io(detail)) => assert!(
                detail.to_lowercase().contains(what),
                "{address}: `{detail}` does not say `{what}`"
            ),
            other => panic!("{address}: expected an I/O failure, got {other:?}"),
        }
    }
    assert_eq!(
        report
            .nodes
            .iter()
            .map(|(a, _)| a.to_string())
            .collect::<Vec<_>>(),
        tls_addresses(fleet)
    );

    // The acquisition gives up once no quorum is possible: the nodes that answered by then
    // are named with the same reason.
    let error = redlock.try_acquire("tls-resource").await.unwrap_err();
    assert!(matches!(error, Error::NoQuorum { .. }), "{error}");
    let nodes = error.nodes().unwrap();
    assert!(
        nodes.count(|s| matches!(s, NodeStatus::Failed(_))) >= 2,
        "{error}"
    );
    for node in nodes.nodes() {
        if let NodeStatus::Failed(failure) = &node.status {
            let shown = format!("{} {failure}", node.address);
            assert!(
                error.to_string().contains(&shown),
                "{shown} not in: {error}"
            );
            assert!(shown.to_lowercase().contains(what), "{shown}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_over_tls_with_the_fleets_ca() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Authority::new("redlock test CA");
    let fleet = tls_fleet(3, server_files(dir.path(), &ca, false));
    let redlock = tls_redlock(&fleet, &ca.pem, None);

    let report = redlock.connect().await;
    assert_eq!(report.connected(), 3, "{report}");
    let mut lease = redlock.acquire("tls-resource").await.unwrap();
    lease.extend().await.unwrap();
    // The key is on a quorum of nodes at least (read through the plain port): the
    // acquisition returns at a quorum, the last node may still be answering.
    assert!(lock_keys(&fleet) >= 2);
    let report = lease.release().await;
    assert!(report.is_quorum_free(), "{report:?}");
    redlock.settle().await;
    assert_eq!(lock_keys(&fleet), 0);

    // The TLS port speaks nothing but TLS: the lease above did not go around it.
    let plain = redis::Client::open(fleet.tls_url(0).replacen("rediss", "redis", 1)).unwrap();
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(2)))
        .set_response_timeout(Some(Duration::from_secs(2)));
    let outcome = async {
        let mut connection = plain
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        redis::cmd("PING")
            .query_async::<String>(&mut connection)
            .await
    }
    .await;
    assert!(outcome.is_err(), "plain text answered on the TLS port");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_ca_is_an_error_naming_each_node() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Authority::new("redlock test CA");
    let fleet = tls_fleet(3, server_files(dir.path(), &ca, false));

    // Another authority than the one that signed the servers' certificate.
    let stranger = Authority::new("some other CA");
    let redlock = tls_redlock(&fleet, &stranger.pem, None);
    assert_every_node_refused(&redlock, &fleet, "certificate").await;

    // A `rediss://` URL as it is: the client trusts the webpki roots, which do not know the
    // test's CA either.
    let urls: Vec<String> = (0..fleet.len()).map(|i| fleet.tls_url(i)).collect();
    let redlock = fresh(Redlock::builder().nodes(urls)).build().unwrap();
    assert_every_node_refused(&redlock, &fleet, "certificate").await;
    assert_eq!(lock_keys(&fleet), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_needs_a_client_certificate_from_the_ca() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Authority::new("redlock test CA");
    let fleet = tls_fleet(3, server_files(dir.path(), &ca, true));

    // Without a certificate the server ends the handshake: every node is named.
    let anonymous = tls_redlock(&fleet, &ca.pem, None);
    let error = anonymous.try_acquire("mtls-resource").await.unwrap_err();
    let text = error.to_string();
    for address in tls_addresses(&fleet) {
        assert!(text.contains(&address), "{address} not named in: {text}");
    }
    assert_eq!(error.nodes().unwrap().count(|s| s.reply().is_some()), 0);

    // With one signed by the CA, the lease works.
    let client = ca.issue(&["locker"], ExtendedKeyUsagePurpose::ClientAuth);
    let redlock = tls_redlock(&fleet, &ca.pem, Some(client));
    let lease = redlock.try_acquire("mtls-resource").await.unwrap();
    assert!(lock_keys(&fleet) >= 2);
    assert!(lease.release().await.is_quorum_free());
    redlock.settle().await;
    assert_eq!(lock_keys(&fleet), 0);
}
