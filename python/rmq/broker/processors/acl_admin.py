"""RocketMQ 4.9.7's ACL admin requests: the accounts and global white lists of the broker's ACL files.

* UPDATE_AND_CREATE_ACL_CONFIG (50): header ``accessKey``, ``secretKey``, ``whiteRemoteAddress``,
  ``admin``, ``defaultTopicPerm``, ``defaultGroupPerm``, ``topicPerms`` / ``groupPerms`` (comma lists of
  ``resource=PERM``). An absent field keeps the account's value, ``admin`` is always written (absent:
  false), as RocketMQ does. The account is written to the file that defines it, a new one to the main
  file (``plain_acl.yml``). Refused: UPDATE_AND_CREATE_ACL_CONFIG_FAILED (209).
* DELETE_ACL_CONFIG (51): header ``accessKey``; DELETE_ACL_CONFIG_FAILED (210).
* UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53): header ``globalWhiteAddrs`` (a comma list) replaces the global
  white list of ``aclFileFullPath`` (one of the files read; absent: the main file);
  UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED (211).
* GET_BROKER_CLUSTER_ACL_INFO (52): response header ``version`` (the main file's ``DataVersion`` JSON),
  ``allAclFileVersion`` (JSON: each file's path and version), ``brokerName``, ``brokerAddr``,
  ``clusterName``.
* GET_BROKER_CLUSTER_ACL_CONFIG (54): body ``{"globalWhiteAddrs": [...], "plainAccessConfigs": [...]}`` of
  every file; the secret keys masked (RocketMQ sends them, and dropped the request in 4.9.8 for that).

Only an admin account may send any of them (:data:`rmq.acl.validator.ADMIN_CODES`; RocketMQ lets every
account). Each change rewrites one file atomically and takes effect at once; it is logged at INFO with
who asked (access key and address) and what changed, never a secret key. Invalid input (a permission
word, an address pattern, a key of 6 characters or fewer, a missing access key) is refused with the
remark saying what is wrong, and nothing is written. With ACL off, each is refused saying so.
"""

from __future__ import annotations

import logging

from rmq.acl.signing import ACCESS_KEY
from rmq.acl.validator import AccessValidator, AccountChange, AclChangeError
from rmq.broker.config import BrokerConfig
from rmq.common import fastjson
from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting.command import RemotingCommand, create_response
from rmq.remoting.context import Processor, RequestContext
from rmq.remoting.headers import header_bool

__all__ = ["AclAdminProcessors"]

log = logging.getLogger(__name__)

_ACL_OFF = "ACL is off on this broker (aclEnable=false): there are no ACL files to read or change"


def _list(value: str | None) -> list[str] | None:
    """A comma list of a header (``None`` when absent; blanks dropped)."""
    if value is None:
        return None
    return [item.strip() for item in value.split(",") if item.strip()]


class AclAdminProcessors:
    def __init__(self, config: BrokerConfig, acl: AccessValidator | None) -> None:
        self.config = config
        self.acl = acl

    def table(self) -> dict[int, Processor]:
        return {
            RequestCode.UPDATE_AND_CREATE_ACL_CONFIG: self.update_account,
            RequestCode.DELETE_ACL_CONFIG: self.delete_account,
            RequestCode.GET_BROKER_CLUSTER_ACL_INFO: self.get_versions,
            RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: self.update_global_white,
            RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG: self.get_config,
        }

    @staticmethod
    def _who(ctx: RequestContext, request: RemotingCommand) -> str:
        return f"accessKey={request.ext_fields.get(ACCESS_KEY) or '-'} from {ctx.remote_addr}"

    def _refuse(self, ctx: RequestContext, request: RemotingCommand, code: int, why: str) -> RemotingCommand:
        log.warning("ACL admin request %d by %s refused: %s", request.code, self._who(ctx, request), why)
        return create_response(request, code, why)

    def update_account(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        failed = ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED
        if self.acl is None:
            return self._refuse(ctx, request, failed, _ACL_OFF)
        f = request.ext_fields
        try:
            change = AccountChange(
                access_key=(f.get("accessKey") or "").strip(),
                secret_key=(f.get("secretKey") or "").strip(),
                admin=header_bool(f, "admin", False),
                white_remote_address=f.get("whiteRemoteAddress"),
                default_topic_perm=f.get("defaultTopicPerm"),
                default_group_perm=f.get("defaultGroupPerm"),
                topic_perms=_list(f.get("topicPerms")),
                group_perms=_list(f.get("groupPerms")),
            )
            self.acl.update_account(change, self._who(ctx, request))
        except (AclChangeError, ValueError) as e:
            return self._refuse(ctx, request, failed, str(e))
        return create_response(request, ResponseCode.SUCCESS)

    def delete_account(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        failed = ResponseCode.DELETE_ACL_CONFIG_FAILED
        if self.acl is None:
            return self._refuse(ctx, request, failed, _ACL_OFF)
        try:
            self.acl.delete_account(
                (request.ext_fields.get("accessKey") or "").strip(), self._who(ctx, request)
            )
        except AclChangeError as e:
            return self._refuse(ctx, request, failed, str(e))
        return create_response(request, ResponseCode.SUCCESS)

    def update_global_white(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        failed = ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED
        if self.acl is None:
            return self._refuse(ctx, request, failed, _ACL_OFF)
        addrs = _list(request.ext_fields.get("globalWhiteAddrs"))
        if addrs is None:
            return self._refuse(ctx, request, failed, "globalWhiteAddrs is required")
        try:
            self.acl.update_global_white(
                addrs,
                (request.ext_fields.get("aclFileFullPath") or "").strip() or None,
                self._who(ctx, request),
            )
        except AclChangeError as e:
            return self._refuse(ctx, request, failed, str(e))
        return create_response(request, ResponseCode.SUCCESS)

    def get_versions(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        if self.acl is None:
            return self._refuse(ctx, request, ResponseCode.SYSTEM_ERROR, _ACL_OFF)
        cfg = self.config
        versions = {path: v.to_json() for path, v in self.acl.versions().items()}
        header = {
            "version": fastjson.dumps(self.acl.main_version().to_json()).decode(),
            "allAclFileVersion": fastjson.dumps(versions).decode(),
            "brokerName": cfg.broker_name,
            "brokerAddr": cfg.broker_addr,
            "clusterName": cfg.broker_cluster_name,
        }
        return create_response(request, ResponseCode.SUCCESS, ext_fields=header)

    def get_config(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        if self.acl is None:
            return self._refuse(ctx, request, ResponseCode.SYSTEM_ERROR, _ACL_OFF)
        white, accounts = self.acl.all_config()
        body = fastjson.dumps({"globalWhiteAddrs": white, "plainAccessConfigs": accounts})
        return create_response(request, ResponseCode.SUCCESS, body=body)
