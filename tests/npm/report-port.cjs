// Preloaded into server-everything (`node --require`), which listens on $PORT and prints the
// port it was given, not the one it got: run with PORT=0, the kernel picks a free port, and this
// prints it. The test holds no port in the meantime that another could take.
const net = require("node:net");

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
    this.once("listening", () => {
        const address = this.address();
        if (address && typeof address === "object") {
            console.error(`report-port: listening on port ${address.port}`);
        }
    });
    return listen.apply(this, args);
};
