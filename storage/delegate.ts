// An engine assembles its ports from modules, one per concern (spans, enrichment, …): the methods of a port are
// forwarded by name to the module implementing them, not by a hand-written forwarding method per call.

/**
 * A base class whose instances have each of `methods`, calling the same method of the object in their `field`
 * (which the subclass sets). `T` is the port those methods make up.
 */
export function delegating<T>(field: string, methods: readonly (keyof T & string)[]): new () => T {
  class Delegating {}
  for (const method of methods) {
    Object.defineProperty(Delegating.prototype, method, {
      writable: true, // tests stand in for a method on one instance
      configurable: true,
      value(this: Record<string, Record<string, (...a: unknown[]) => unknown>>, ...args: unknown[]) {
        return this[field]![method]!(...args);
      },
    });
  }
  return Delegating as unknown as new () => T;
}
