// An engine assembles its ports from modules, one per concern (spans, enrichment, feedback, …): the methods of a port
// are forwarded by name to the module implementing it, not by a hand-written forwarding method per call.

/**
 * A base class whose instances have the methods listed under each field, each calling the same method of the
 * object the subclass keeps in that field. `T` is the ports those methods make up.
 */
export function delegating<T>(byField: Record<string, readonly (keyof T & string)[]>): new () => T {
  class Delegating {}
  for (const [field, methods] of Object.entries(byField)) {
    for (const method of methods) {
      Object.defineProperty(Delegating.prototype, method, {
        writable: true, // tests stand in for a method on one instance
        configurable: true,
        value(this: Record<string, Record<string, (...a: unknown[]) => unknown>>, ...args: unknown[]) {
          return this[field]![method]!(...args);
        },
      });
    }
  }
  return Delegating as unknown as new () => T;
}
