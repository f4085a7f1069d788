package rmqpeer;

import org.apache.rocketmq.tools.command.MQAdminStartup;
import org.apache.rocketmq.tools.command.offset.GetConsumerStatusCommand;

/**
 * {@code MQAdminStartup} with {@code getConsumerStatus}, which rocketmq-tools 4.9.8 ships
 * ({@code GetConsumerStatusCommand}) but does not register: the command is added first, then
 * {@code MQAdminStartup.main} registers and runs everything as usual.
 */
public final class MQAdminPlus {
    private MQAdminPlus() {
    }

    public static void main(String[] args) {
        MQAdminStartup.initCommand(new GetConsumerStatusCommand());
        MQAdminStartup.main(args);
    }
}
