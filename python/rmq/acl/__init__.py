"""RocketMQ ACL 1.0 (``plain_acl.yml``): request signing, the rules file, and the server-side check.

* :mod:`rmq.acl.signing` -- what a client signs and how (the Java ``AclClientRPCHook``'s algorithm);
* :mod:`rmq.acl.rules` -- ``plain_acl.yml`` parsed into immutable rules (accounts, white lists, perms,
  the file's ``dataVersion``), several files merged, and a file rewritten atomically;
* :mod:`rmq.acl.validator` -- per request code, which resources need which permission; the check a server's
  dispatcher runs before any processor; the files (``plain_acl.yml`` and the ``acl/`` directory beside it)
  watched and swapped in atomically; and the changes the ACL admin requests make to them.
"""

import typing

from rmq.common.lazy import lazy_exports

if typing.TYPE_CHECKING:
    from rmq.acl.rules import AclConfigError, AclRules, load_rules, parse_rules
    from rmq.acl.signing import (
        ACCESS_KEY,
        SECURITY_TOKEN,
        SIGNATURE,
        RequestSigner,
        calc_signature,
        signed_content,
    )
    from rmq.acl.validator import AccessValidator

# Imported on first use (rmq.common.lazy): a client signing requests needs neither rules nor validator.
_WHERE = {
    "AclConfigError": "rmq.acl.rules",
    "AclRules": "rmq.acl.rules",
    "load_rules": "rmq.acl.rules",
    "parse_rules": "rmq.acl.rules",
    "ACCESS_KEY": "rmq.acl.signing",
    "SECURITY_TOKEN": "rmq.acl.signing",
    "SIGNATURE": "rmq.acl.signing",
    "RequestSigner": "rmq.acl.signing",
    "calc_signature": "rmq.acl.signing",
    "signed_content": "rmq.acl.signing",
    "AccessValidator": "rmq.acl.validator",
}
__getattr__ = lazy_exports("rmq.acl", globals(), _WHERE)


__all__ = [
    "ACCESS_KEY",
    "SECURITY_TOKEN",
    "SIGNATURE",
    "AccessValidator",
    "AclConfigError",
    "AclRules",
    "RequestSigner",
    "calc_signature",
    "load_rules",
    "parse_rules",
    "signed_content",
]
