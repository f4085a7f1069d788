package org.rmq.spark.remoting;

import java.io.Serializable;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.util.Base64;
import java.util.Map;
import java.util.TreeMap;

import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * Signs requests as RocketMQ ACL 1.0 does (the Java client's {@code AclClientRPCHook}): {@code AccessKey}
 * (and {@code SecurityToken}) added to the header fields, then {@code Signature}: Base64 of HmacSHA1, under the
 * secret key, of the fields' values sorted by key (the signature left out) followed by the body.
 */
public final class Signer implements Serializable {
    private static final long serialVersionUID = 1L;
    private static final String ACCESS_KEY = "AccessKey";
    private static final String SECURITY_TOKEN = "SecurityToken";
    private static final String SIGNATURE = "Signature";

    private final String accessKey;
    private final String secretKey;
    private final String securityToken;

    private Signer(String accessKey, String secretKey, String securityToken) {
        this.accessKey = accessKey;
        this.secretKey = secretKey;
        this.securityToken = securityToken;
    }

    /** The signer of options {@code accessKey}, {@code secretKey} (and {@code securityToken}), or null. */
    public static Signer of(Map<String, String> options) {
        String ak = get(options, "accessKey");
        String sk = get(options, "secretKey");
        if (ak == null || ak.isEmpty() || sk == null || sk.isEmpty()) {
            return null;
        }
        String token = get(options, "securityToken");
        return new Signer(ak, sk, token == null || token.isEmpty() ? null : token);
    }

    private static String get(Map<String, String> o, String name) {
        for (Map.Entry<String, String> e : o.entrySet()) {
            if (e.getKey().equalsIgnoreCase(name)) {
                return e.getValue();
            }
        }
        return null;
    }

    /** Add the credentials and the signature of {@code ext} and the first {@code bodyLength} bytes of the body. */
    public void sign(Map<String, String> ext, byte[] body, int bodyLength) {
        ext.remove(SIGNATURE);
        ext.put(ACCESS_KEY, accessKey);
        if (securityToken != null) {
            ext.put(SECURITY_TOKEN, securityToken);
        }
        StringBuilder values = new StringBuilder();
        for (String v : new TreeMap<>(ext).values()) { // String order: UTF-16 code units, as Java's TreeMap
            values.append(v);
        }
        try {
            Mac mac = Mac.getInstance("HmacSHA1");
            mac.init(new SecretKeySpec(secretKey.getBytes(StandardCharsets.UTF_8), "HmacSHA1"));
            mac.update(values.toString().getBytes(StandardCharsets.UTF_8));
            if (bodyLength > 0) {
                mac.update(body, 0, bodyLength);
            }
            ext.put(SIGNATURE, Base64.getEncoder().encodeToString(mac.doFinal()));
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("HmacSHA1 is not available to sign requests", e);
        }
    }

    @Override
    public String toString() { // never the secret
        return "Signer(accessKey=" + accessKey + ")";
    }
}
