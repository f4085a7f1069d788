"""BrokerController: the composition root. It opens the store, loads the managers, registers the
processors, starts the periodic services and the name server registration, and shuts all of it
down in order. No broker rule lives here."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import TYPE_CHECKING, Any

from rmq.acl import AccessValidator, AclConfigError, RequestSigner
from rmq.acl.audit import AdminAudit
from rmq.acl.validator import fast_send_rules
from rmq.broker import journal
from rmq.broker.clients import ConsumerManager, ProducerManager
from rmq.broker.config import BrokerConfig, ConfigError
from rmq.broker.consumer_offset import ConsumerOffsetManager
from rmq.broker.flush_responder import FlushResponder
from rmq.broker.ha.master import HAMaster, HASettings
from rmq.broker.ha.responder import FastPathReplicaWarnings, ReplicaResponder
from rmq.broker.ha.slave import HAClient
from rmq.broker.long_polling import PullHoldService
from rmq.broker.metrics import parse_metrics_label
from rmq.broker.metrics_collector import BrokerCollector
from rmq.broker.mq_lock import RebalanceLockManager
from rmq.broker.pop.service import PopService
from rmq.broker.processors.acl_admin import AclAdminProcessors
from rmq.broker.processors.admin import AdminProcessors
from rmq.broker.processors.admin_views import AdminViewProcessors
from rmq.broker.processors.client import ClientProcessors
from rmq.broker.processors.consumer_calls import ConsumerCallProcessors
from rmq.broker.processors.offsets import OffsetProcessors
from rmq.broker.processors.pull import PullProcessor
from rmq.broker.processors.query import QueryProcessors
from rmq.broker.processors.reply import ReplyProcessor
from rmq.broker.processors.send import SendProcessor
from rmq.broker.processors.send_back import SendBackProcessor
from rmq.broker.processors.stats import StatsProcessors
from rmq.broker.registration import NameServerRegistration
from rmq.broker.schedule import DEFAULT_DELAY_LEVELS, ScheduleService, parse_delay_levels
from rmq.broker.services import BrokerServices
from rmq.broker.slave_sync import SYNC_INTERVAL_S, SlaveSynchronize
from rmq.broker.stats_log import StatsLog
from rmq.broker.subscription_group import SubscriptionGroupManager
from rmq.broker.timer import TimerService
from rmq.broker.topic_config import PERSIST_INTERVAL_S, TopicConfigManager
from rmq.broker.transaction import EndTransactionProcessor, TransactionCheckService
from rmq.common.codes import RMQ_VERSION, RequestCode, ResponseCode
from rmq.common.metrics import MetricsExporter
from rmq.common.service import PeriodicTask
from rmq.remoting.channel import Channel
from rmq.remoting.client import RemotingClient
from rmq.remoting.command import RemotingCommand, create_response
from rmq.remoting.native import NativeRemotingServer
from rmq.remoting.server import RemotingServer
from rmq.remoting.tls import TlsConfigError
from rmq.store import AsyncStore, DiskFullError, MessageStore, SlaveStoreError, StoreShutDownError

if TYPE_CHECKING:
    from rmq.dashboard import Dashboard

__all__ = ["BrokerController"]

log = logging.getLogger(__name__)


class _StartingRefusal:
    """The processor of every request before the broker serves: SERVICE_NOT_AVAILABLE (counted)."""

    def __init__(self) -> None:
        self.refused = 0

    def __call__(self, _ctx: Any, request: RemotingCommand) -> RemotingCommand:
        self.refused += 1
        return create_response(
            request, ResponseCode.SERVICE_NOT_AVAILABLE, "broker is starting, try again later"
        )


class BrokerController:
    def __init__(self, config: BrokerConfig) -> None:
        config.validate()
        self.config = config
        self.store: MessageStore | None = None
        self.services: BrokerServices | None = None
        server_options: dict[str, Any] = {
            "name": "broker",
            "max_in_flight": config.server_max_in_flight,
            "idle_timeout_s": config.channel_expired_timeout / 1000,
        }
        tls = config.tls_server()
        if tls.enabled:
            try:
                tls.context()  # certificate and key load now, not at the first connection
            except TlsConfigError as e:
                raise ConfigError(str(e)) from None
            server_options["tls"] = tls
        native = config.network_thread
        if native and tls.key_password:
            # The network thread (rustls) takes no encrypted key: the asyncio server serves the port.
            log.info(
                "tls.server.keyPassword is set: the broker port is served by the asyncio server, not the "
                "network thread (its send fast path is off)"
            )
            native = False
        self.remoting: RemotingServer = (
            NativeRemotingServer(
                flush_timeout_ms=config.sync_flush_timeout_ms,
                spin_us=config.network_thread_spin_micros,
                **server_options,
            )
            if native
            else RemotingServer(**server_options)
        )
        inner = config.inner_credentials()
        self.client = RemotingClient(
            rpc_hook=RequestSigner(*inner) if inner else None, tls=config.tls_client()
        )
        self.acl: AccessValidator | None = None
        if config.acl_enable:
            try:
                self.acl = AccessValidator.from_file(config.acl_path)
            except AclConfigError as e:
                raise ConfigError(f"aclEnable=true but {e}") from None
            self.remoting.dispatcher.guard = self.acl.guard
        self.remoting.dispatcher.audit = AdminAudit()
        if config.acl_require_tls:
            log.info(
                "aclRequireTls=true: the broker port serves TLS connections only, plaintext ones are refused "
                "(the HA port stays plaintext)"
            )
        self._tasks: list[PeriodicTask] = []
        self._registration: NameServerRegistration | None = None
        self.ha_master: HAMaster | None = None
        self.ha_client: HAClient | None = None
        self._metrics: MetricsExporter | None = None
        self.dashboard: Dashboard | None = None
        self.pop: PopService | None = None

    @property
    def metrics_port(self) -> int:
        """The port ``/metrics`` is served on (0: not served)."""
        return self._metrics.port if self._metrics is not None else 0

    @property
    def port(self) -> int:
        return self.remoting.port

    async def start(self, host: str | None = None) -> None:
        cfg = self.config
        loop = asyncio.get_running_loop()
        # The store opens (and recovers) with the GIL released; keep the loop responsive.
        # The real port is needed for the store host, so bind first.
        ha_port = cfg.ha_port
        # Until the processors are registered (after the store's recovery), requests are answered
        # SERVICE_NOT_AVAILABLE, which clients retry (a send on another broker), not
        # REQUEST_CODE_NOT_SUPPORTED, which they take as final.
        starting = _StartingRefusal()
        self.remoting.dispatcher.register_default(starting)
        await self.remoting.start(host or cfg.bind_address, cfg.listen_port)
        cfg.listen_port = self.remoting.port
        store = await loop.run_in_executor(None, lambda: MessageStore(cfg.store_config()))
        self.store = store
        report = store.recovery_report()
        log.log(
            logging.WARNING if report["last_shutdown"] == "crashed" else logging.INFO,
            "store %s opened after a %s shutdown: recovery scanned %d bytes, %d records in %.2f s; "
            "commitlog ends at %d",
            store.root,
            report["last_shutdown"],
            report["scanned_bytes"],
            report["scanned_records"],
            report["scan_seconds"],
            report["commitlog_end"],
        )
        store.set_slave(cfg.is_slave)
        journal.log_new_events(store)
        astore = AsyncStore(store, loop)
        topics = TopicConfigManager(
            cfg.config_dir,
            cluster_name=cfg.broker_cluster_name,
            broker_name=cfg.broker_name,
            auto_create_topic=cfg.auto_create_topic_enable,
            default_queue_nums=cfg.default_topic_queue_nums,
            cluster_topic_enable=cfg.cluster_topic_enable,
            broker_topic_enable=cfg.broker_topic_enable,
            trace_topic_enable=cfg.trace_topic_enable,
        )
        topics.load()
        topics.persist()
        retention = topics.retention_table()
        store.replace_topic_retention(retention)
        if retention:
            log.info(
                "topics with their own retention (retention.hours): %s",
                ", ".join(f"{t}={ms / 3_600_000:g}" for t, ms in sorted(retention.items())),
            )
            # At once, not at the first retention round: what they hid stays hidden across a restart.
            await loop.run_in_executor(None, store.expire_topics)
        groups = SubscriptionGroupManager(cfg.config_dir, cfg.auto_create_subscription_group)
        groups.load()
        offsets = ConsumerOffsetManager(cfg.config_dir)
        offsets.load()
        pull_holder: list[PullProcessor] = []
        holds = PullHoldService(loop, store.max_offset, lambda h: pull_holder[0].resume(h))
        s = BrokerServices(
            config=cfg,
            store=store,
            astore=astore,
            topics=topics,
            groups=groups,
            offsets=offsets,
            consumers=ConsumerManager(cfg.channel_expired_timeout),
            producers=ProducerManager(cfg.channel_expired_timeout),
            locks=RebalanceLockManager(),
            holds=holds,
            flush_responder=FlushResponder(astore, cfg.sync_flush_timeout_ms / 1000),
        )
        ha_settings = HASettings(
            heartbeat_s=cfg.ha_send_heartbeat_interval / 1000,
            housekeeping_s=cfg.ha_housekeeping_interval / 1000,
            batch_size=cfg.ha_transfer_batch_size,
            fallbehind_max=cfg.ha_slave_fallbehind_max,
            commitlog_file_size=int(cfg.store.get("mappedFileSizeCommitLog", 1 << 30)),
        )
        if cfg.is_slave:
            self.ha_client = HAClient(store, ha_settings, cfg.ha_master_address)
        else:
            self.ha_master = HAMaster(
                store, astore, ha_settings, os.path.join(cfg.config_dir, "haDivergedSlaves.json")
            )
            await self.ha_master.start(host or cfg.bind_address, ha_port)
            cfg.ha_listen_port = self.ha_master.port
            s.ha_master = self.ha_master
        if cfg.broker_role == "SYNC_MASTER":
            s.replica_responder = ReplicaResponder(
                lambda: self.ha_master.push2slave_max if self.ha_master else 0,
                cfg.slave_timeout / 1000,
                self._replicated,
            )
            self.ha_master.add_ack_listener(s.replica_responder.release)  # type: ignore[union-attr]
        # The network thread's fast path answers plain sends; on a SYNC_MASTER its answers wait for a
        # slave's ack as the Python path's do (the HA master reports every higher ack and whether a slave
        # is connected to it). A slave refuses sends, so it leaves every send to Python.
        replica_warnings: FastPathReplicaWarnings | None = None
        if isinstance(self.remoting, NativeRemotingServer) and not cfg.is_slave:
            sync_master = cfg.broker_role == "SYNC_MASTER"
            self.remoting.enable_fast_send(
                store,
                cluster_name=cfg.broker_cluster_name,
                region_id=cfg.region_id,
                trace_on=cfg.trace_on,
                max_body=cfg.max_message_size,
                version=RMQ_VERSION,
                sync_master=(cfg.ha_slave_fallbehind_max, cfg.slave_timeout) if sync_master else None,
                acl=self.acl is not None,
                fast_failure=s.fast_failure.fast_send_limits(),
            )
            net = self.remoting.net
            s.fast_send = net
            # The pull fast path forgets a group when its config or its consumers' subscription changes
            # (topic and broker config changes reach it through _send_rules_changed), and hands what it
            # served to the Python side's counters and offset table before they are read.
            assert net is not None
            forget_group = net.forget_pull_group
            s.consumers.on_subscription_change = forget_group
            s.groups.on_change = lambda g: net.forget_topics() if g is None else forget_group(g)
            s.offsets.drain = s.drain_pulls
            if self.acl is not None:
                # With ACL on, the network thread takes a send only when it checked its signature and PUB
                # permission against these rules (pushed again on every change); the validator answers
                # everything else.
                assert net is not None
                set_rules = net.set_acl_rules
                self.acl.add_rules_listener(lambda rules: set_rules(fast_send_rules(rules)))
                log.info(
                    "aclEnable=true: the network thread's send fast path checks signed sends itself "
                    "(%d accounts); the ACL validator answers the others",
                    len(self.acl.rules.accounts),
                )
            if sync_master:
                assert net is not None and self.ha_master is not None
                net.set_replicated(self.ha_master.push2slave_max)
                self.ha_master.add_ack_listener(net.set_replicated)
                self.ha_master.add_slave_listener(net.set_slave_connected)
                replica_warnings = FastPathReplicaWarnings(
                    net, cfg.slave_timeout / 1000, cfg.ha_slave_fallbehind_max
                )
        if self.acl is not None:
            s.read_check = self.acl.check_read
        s.counters.boot_ms = int(time.time() * 1000)
        self._mark_day()
        s.delay_levels = parse_delay_levels(cfg.store.get("messageDelayLevel", DEFAULT_DELAY_LEVELS))
        self.services = s
        self.schedule = ScheduleService(store, cfg.config_dir, s.delay_levels)
        self.schedule.load()
        s.schedule = self.schedule
        self.transactions = TransactionCheckService(s)
        s.transaction_stats = self.transactions.stats
        self.transactions.fast = s.fast_send  # None without a network thread, and on a slave
        if not cfg.is_slave:
            self.transactions.load()  # the op records since the committed op offset, once
        self.timer = TimerService(store, cfg.config_dir)
        self.timer.load()
        astore.dispatched.add_listener(holds.on_dispatch)
        holds.watch = astore.dispatched.watch
        if not cfg.is_slave:
            # POP (5.x consumers): the revive topic is replayed before anything is served.
            self.pop = PopService(s, loop)
            self.pop.load()
            s.pop_revive = self.pop.revive
            astore.dispatched.add_listener(self.pop.holds.on_dispatch)
            self.pop.holds.watch = astore.dispatched.watch

        self._registration = NameServerRegistration(cfg, topics, self.client)
        slave_sync: PeriodicTask | None = None
        if self.ha_client is not None:
            ha_client = self.ha_client
            sync = SlaveSynchronize(self.client, topics, groups, offsets, self.schedule)
            slave_sync = PeriodicTask("slave-synchronize", SYNC_INTERVAL_S, sync.sync_all, initial_delay_s=0)

            def learned(fields: dict[str, str]) -> None:
                if not cfg.ha_master_address:
                    ha_client.update_master_address(fields.get("haServerAddr"))
                if sync.set_master_addr(fields.get("masterAddr")) and slave_sync is not None:
                    slave_sync.wakeup()

            self._registration.on_answer = learned
            self.ha_client.start()
        topics.on_change = self._topic_changed
        cfg.on_update.append(lambda _props: topics.broker_config_changed())
        s.register_brokers = self._registration.register_soon
        s.registrations_settled = self._registration.settled

        # A full disk (or a store shutting down) refuses every write the same way, whichever
        # processor wrote: SERVICE_NOT_AVAILABLE with the store's reason.
        for refusal in (DiskFullError, StoreShutDownError, SlaveStoreError):
            self.remoting.dispatcher.map_error(refusal, ResponseCode.SERVICE_NOT_AVAILABLE)
        send = SendProcessor(s)
        for code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
            self.remoting.register(code, send)
        reply = ReplyProcessor(s, send)
        for code in (RequestCode.SEND_REPLY_MESSAGE, RequestCode.SEND_REPLY_MESSAGE_V2):
            self.remoting.register(code, reply)
        pull = PullProcessor(s)
        pull_holder.append(pull)
        # LITE_PULL_MESSAGE (361, 5.x clients: Java 5, rocketmq-client-rust) is the same pull as 11.
        for code in (RequestCode.PULL_MESSAGE, RequestCode.LITE_PULL_MESSAGE):
            self.remoting.register(code, pull)
        for group in (
            OffsetProcessors(s),
            ClientProcessors(s),
            QueryProcessors(s),
            AdminProcessors(s),
            AclAdminProcessors(cfg, self.acl),
            AdminViewProcessors(s),
            ConsumerCallProcessors(s),
            StatsProcessors(s),
            SendBackProcessor(s),
            EndTransactionProcessor(s, self.transactions),
            *([self.pop.processors] if self.pop is not None else []),
        ):
            for code, proc in group.table().items():
                self.remoting.register(code, proc)
        self.remoting.dispatcher.register_default(None)
        if starting.refused:
            log.warning(
                "%d requests answered SERVICE_NOT_AVAILABLE while the broker started (its store recovering)",
                starting.refused,
            )
        self.remoting.add_close_listener(self._channel_closed)
        if cfg.metrics_exporter_type == "PROM":
            self._start_metrics(s)

        self._tasks = [
            PeriodicTask("persist-topics", PERSIST_INTERVAL_S, topics.persist_if_dirty, final_tick=True),
            PeriodicTask(
                "persist-consumer-offsets",
                cfg.flush_consumer_offset_interval / 1000,
                offsets.persist_if_dirty,
                final_tick=True,
            ),
            PeriodicTask("scan-expired-clients", 10.0, self._scan_clients),
            PeriodicTask("mark-day", 60.0, self._mark_day),
            PeriodicTask("sample-rates", 1.0, s.sample_rates, initial_delay_s=0.0),
            *(
                [PeriodicTask("stats-log", cfg.stats_log_interval / 1000, StatsLog(s).tick)]
                if cfg.stats_log_interval > 0
                else []
            ),
            PeriodicTask("log-store-journal", 1.0, lambda: journal.log_new_events(store), final_tick=True),
            PeriodicTask("batch-uniq-key-warnings", 1.0, send.warn_batch_uniq_keys),
            PeriodicTask(
                "register-name-servers",
                max(10_000, min(cfg.register_name_server_period, 60_000)) / 1000,
                self._registration.register_all,
            ),
        ]
        if slave_sync is not None:
            self._tasks.append(slave_sync)
        if replica_warnings is not None:
            self._tasks.append(PeriodicTask("sync-master-fast-path-warnings", 1.0, replica_warnings.tick))
        if not cfg.is_slave:
            # What writes messages of its own runs on masters only (a slave's log is its master's).
            check = PeriodicTask(
                "transaction-check", cfg.transaction_check_interval / 1000, self.transactions.check
            )
            self.transactions.request_check = check.wakeup
            self._tasks += [
                PeriodicTask("schedule-delay-levels", 0.1, self.schedule.tick, initial_delay_s=0.1),
                PeriodicTask("timer-messages", 0.1, self.timer.tick, initial_delay_s=0.1),
                check,
            ]
            if s.fast_send is not None:
                # The network thread's END_TRANSACTION decisions: their op records read, the floor pushed.
                self._tasks.append(PeriodicTask("transaction-fast-path", 1.0, self.transactions.sync_fast))
        if self.pop is not None:
            self._tasks += [
                PeriodicTask("pop-revive", 0.2, self.pop.tick),
                PeriodicTask(
                    "pop-persist",
                    cfg.flush_consumer_offset_interval / 1000,
                    self.pop.revive.persist,
                    final_tick=True,
                ),
            ]
        if self.acl is not None:
            self._tasks.append(PeriodicTask("acl-file-reload", 1.0, self.acl.reload_if_changed))
        for t in self._tasks:
            t.start()
        if cfg.namesrv_list():
            n = await self._registration.register_all()
            if n == 0:
                log.warning("no name server accepted the registration yet; retrying periodically")
        if cfg.dashboard_port >= 0:
            await self._start_dashboard(host or cfg.bind_address)
        log.info(
            "broker %s (cluster %s) serving on %s, store %s, %s, %s (brokerId %d)",
            cfg.broker_name,
            cfg.broker_cluster_name,
            cfg.broker_addr,
            cfg.store_root,
            "SYNC_FLUSH" if cfg.sync_flush else "ASYNC_FLUSH",
            cfg.broker_role,
            cfg.broker_id,
        )

    def _replicated(self, end: int, ctx: Any, response: Any, status_remark: bool) -> None:
        """A SYNC_MASTER answer a slave acknowledged (or timed out): with SYNC_FLUSH it waits for the
        flush as well."""
        s = self.services
        if not (
            s is not None
            and self.config.sync_flush
            and s.hold_until_flushed(end, ctx, response, status_remark)
        ):
            ctx.send_response(response)

    def _start_metrics(self, s: BrokerServices) -> None:
        """Serve RocketMQ 5.x's Prometheus metrics (``metricsExporterType=PROM``); requests are timed from
        now on."""
        cfg = self.config
        self.remoting.dispatcher.latency = s.metrics.rpc
        collector = BrokerCollector(s, self.remoting.dispatcher, parse_metrics_label(cfg.metrics_label))
        self._metrics = MetricsExporter(collector.collect, "broker")
        self._metrics.start(cfg.metrics_prom_exporter_host or cfg.broker_ip1, cfg.metrics_prom_exporter_port)

    async def _start_dashboard(self, host: str) -> None:
        """Serve the web dashboard (``dashboardPort``); it reads the cluster through the name servers."""
        cfg = self.config
        if not cfg.namesrv_list():
            log.warning(
                "dashboardPort=%d: no dashboard, the broker has no namesrvAddr to read", cfg.dashboard_port
            )
            return
        from rmq.client.config import ClientConfig
        from rmq.dashboard import Dashboard

        # With ACL on, the dashboard reads as the broker's inner account and admin actions need a login.
        creds = cfg.inner_credentials() if cfg.acl_enable else None
        self.dashboard = Dashboard(
            namesrv_addr=cfg.namesrv_addr or "",
            admin_enabled=cfg.dashboard_admin,
            client_config=ClientConfig(access_key=creds[0], secret_key=creds[1]) if creds else None,
            login=cfg.acl_enable,
        )
        await self.dashboard.start(host, cfg.dashboard_port)

    def _topic_changed(self, topic: str | None) -> None:
        """A topic created, changed or deleted (`topic`), or every topic (None): the store learns its
        retention, then the send rules and the name servers the rest."""
        s = self.services
        if s is not None:
            if topic is None:
                s.store.replace_topic_retention(s.topics.retention_table())
            else:
                ms = s.topics.retention_ms(topic)
                before = dict(s.store.topic_retention()).get(topic)
                if ms != before:
                    s.store.set_topic_retention(topic, ms)
                if ms != before and topic in s.topics:
                    log.info(
                        "topic %s: its messages are now served for %s (retention.hours; was %s)",
                        topic,
                        "as long as the CommitLog keeps them" if ms is None else f"{ms / 3_600_000:g} hours",
                        "the CommitLog's time" if before is None else f"{before / 3_600_000:g} hours",
                    )
        self._send_rules_changed(topic)

    def _send_rules_changed(self, topic: str | None) -> None:
        """The one hook for every change to who may send to a topic, how and where: a topic created,
        changed or deleted (`topic`), or the broker's run-time config (None: every topic). The
        network thread's fast path forgets what it vetted, so the next send is answered by Python
        under the new rules (and vetted again if it may); the name servers learn the change soon."""
        s = self.services
        if s is not None and s.fast_send is not None:
            if topic is None:
                s.fast_send.forget_topics()
            else:
                s.fast_send.forget_topic(topic)
        if self._registration is not None:
            self._registration.register_soon(topic)

    def _channel_closed(self, channel: Channel) -> None:
        s = self.services
        if s is None:
            return
        s.producers.channel_closed(channel.channel_id)
        for group in s.consumers.channel_closed(channel.channel_id):
            cfg = s.groups.table.get(group)
            if cfg is None or cfg.notify_consumer_ids_changed_enable:
                s.consumers.notify_ids_changed(group)

    def _mark_day(self) -> None:
        s = self.services
        if s is not None:
            s.counters.mark_day(time.strftime("%Y-%m-%d"), s.put_messages())

    def _scan_clients(self) -> None:
        s = self.services
        if s is None:
            return
        s.producers.scan_expired()
        for group, ch in s.consumers.scan_expired():
            log.info("consumer %s of %s expired", ch.client_id, group)
            ch.ctx.close()
            s.consumers.notify_ids_changed(group)

    async def shutdown(self) -> None:
        """Stop serving, persist configs, unregister, flush and close the store cleanly."""
        if self.dashboard is not None:
            dashboard, self.dashboard = self.dashboard, None
            await dashboard.stop()
        if self._metrics is not None:
            exporter, self._metrics = self._metrics, None
            await asyncio.get_running_loop().run_in_executor(None, exporter.stop)
        for t in self._tasks:
            await t.stop()
        if self._registration is not None:
            await self._registration.close()
            if self.config.namesrv_list():
                await self._registration.unregister_all()
        await self.remoting.stop()
        if self.ha_client is not None:
            await self.ha_client.stop()
        if self.ha_master is not None:
            await self.ha_master.stop()
        await self.client.close()
        s = self.services
        if s is not None:
            s.holds.close()
            if self.pop is not None:
                self.pop.holds.close()
            s.flush_responder.close()
            if s.replica_responder is not None:
                s.replica_responder.close()
            s.astore.close()
            s.offsets.persist()
            self.schedule.persist()
            self.timer.persist()
            s.topics.persist()
            s.groups.persist()
        if self.store is not None:
            store = self.store
            await asyncio.get_running_loop().run_in_executor(None, store.shutdown)
