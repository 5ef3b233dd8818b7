/** Input the canonical form rejects: "offset N: reason". */
export class CanonicalError extends Error {
  /**
   * @param offset 0-based byte offset into the input (into the canonical body
   *   for routing-key errors)
   * @param code stable reason code shared with the Go reference, for example
   *   "duplicate-member"
   */
  constructor(
    readonly offset: number,
    readonly code: string,
    readonly reason: string,
  ) {
    super(`offset ${offset}: ${reason}`);
    this.name = "CanonicalError";
  }
}

/** An out-of-range option: prefix length, group id, mode, or a call's fairness id or objective. */
export class OptionError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = "OptionError";
  }
}

/** A prompt spec the builder cannot render. */
export class SpecError extends Error {
  constructor(
    readonly field: string,
    readonly reason: string,
  ) {
    super(`prompt spec: ${field}: ${reason}`);
    this.name = "SpecError";
  }
}
