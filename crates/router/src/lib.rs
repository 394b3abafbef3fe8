//! `router`: presence, the subscription index, fan-out planning and history rings. Pure data structures, no IO.
