"""RocketMQ ACL 1.0 (``plain_acl.yml``): request signing, the rules file, and the server-side check.

* :mod:`rmq.acl.signing` -- what a client signs and how (the Java ``AclClientRPCHook``'s algorithm);
* :mod:`rmq.acl.rules` -- ``plain_acl.yml`` parsed into immutable rules (accounts, white lists, perms,
  the file's ``dataVersion``), several files merged, and a file rewritten atomically;
* :mod:`rmq.acl.validator` -- per request code, which resources need which permission; the check a server's
  dispatcher runs before any processor; the files (``plain_acl.yml`` and the ``acl/`` directory beside it)
  watched and swapped in atomically; and the changes the ACL admin requests make to them.
"""

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
