package org.rmq.spark.remoting;

import java.io.IOException;
import java.io.InputStream;
import java.io.Serializable;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.util.Map;

import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLSocket;
import javax.net.ssl.SSLSocketFactory;
import javax.net.ssl.TrustManager;
import javax.net.ssl.TrustManagerFactory;
import javax.net.ssl.X509TrustManager;

/**
 * TLS to name servers and brokers, as rmq's Python client does it (option {@code tls=true}): the server's
 * certificate checked against the PEM CAs of {@code tlsCa} (or the JVM's own when {@code tlsVerify=true}
 * without it), not checked when there is no CA and {@code tlsVerify} is not true; no host name check
 * (brokers are addressed by the IP the name server hands out). Client certificates are the Python paths'.
 */
public final class Tls implements Serializable {
    private static final long serialVersionUID = 1L;

    private final String caPath;
    private final boolean verify;
    private transient SSLSocketFactory factory;

    private Tls(String caPath, boolean verify) {
        this.caPath = caPath;
        this.verify = verify;
    }

    /** The TLS settings of options {@code tls}, {@code tlsCa}, {@code tlsVerify}; null when TLS is off. */
    public static Tls of(Map<String, String> options) {
        if (!"true".equalsIgnoreCase(get(options, "tls"))) {
            return null;
        }
        String ca = get(options, "tlsCa");
        ca = ca == null || ca.isBlank() ? null : ca;
        String v = get(options, "tlsVerify");
        boolean verify = v == null ? ca != null : "true".equalsIgnoreCase(v.strip());
        return new Tls(ca, verify);
    }

    private static String get(Map<String, String> o, String name) {
        for (Map.Entry<String, String> e : o.entrySet()) {
            if (e.getKey().equalsIgnoreCase(name)) {
                return e.getValue();
            }
        }
        return null;
    }

    /** {@code plain}, connected to {@code host:port}, wrapped in a TLS session whose handshake is done. */
    Socket wrap(Socket plain, String host, int port) throws IOException {
        SSLSocket s = (SSLSocket) factory().createSocket(plain, host, port, true);
        s.setUseClientMode(true);
        try {
            s.startHandshake();
        } catch (IOException e) {
            s.close();
            throw new IOException("TLS handshake with " + host + ":" + port + " failed: " + e.getMessage(), e);
        }
        return s;
    }

    private synchronized SSLSocketFactory factory() throws IOException {
        if (factory == null) {
            try {
                SSLContext ctx = SSLContext.getInstance("TLS");
                ctx.init(null, trustManagers(), null);
                factory = ctx.getSocketFactory();
            } catch (GeneralSecurityException e) {
                throw new IOException("cannot set up TLS (option tlsCa=" + caPath + "): " + e.getMessage(), e);
            }
        }
        return factory;
    }

    private TrustManager[] trustManagers() throws GeneralSecurityException, IOException {
        if (!verify) {
            return new TrustManager[] {new TrustAll()};
        }
        TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        if (caPath == null) {
            tmf.init((KeyStore) null); // the JVM's own CAs
            return tmf.getTrustManagers();
        }
        KeyStore ks = KeyStore.getInstance(KeyStore.getDefaultType());
        ks.load(null, null);
        try (InputStream in = Files.newInputStream(Path.of(caPath))) {
            int i = 0;
            for (Certificate c : CertificateFactory.getInstance("X.509").generateCertificates(in)) {
                ks.setCertificateEntry("ca-" + i++, c);
            }
        }
        tmf.init(ks);
        return tmf.getTrustManagers();
    }

    /** Accepts any server certificate (TLS without verification, as the option asks). */
    private static final class TrustAll implements X509TrustManager {
        @Override
        public void checkClientTrusted(X509Certificate[] chain, String authType) {
            // a client's trust of other clients is never asked
        }

        @Override
        public void checkServerTrusted(X509Certificate[] chain, String authType) {
            // not verified: tls=true without tlsCa or tlsVerify
        }

        @Override
        public X509Certificate[] getAcceptedIssuers() {
            return new X509Certificate[0];
        }
    }
}
