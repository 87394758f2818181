package grammar

// TooLarge opens the message of a schema refused for what compiling it
// would cost: the compile is bounded by counts of work (states, steps),
// not by a clock, so that a schema compiles or not whatever the load.
const TooLarge = "the schema is too large to compile in bounded time"
