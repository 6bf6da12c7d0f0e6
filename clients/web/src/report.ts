/**
 * A device's report for a verified task, with every refusal of the Python device in its order
 * (fedhh_device/fleet.py `_perform`): the local epsilon cap, then the lifetime budget (a retry
 * gets the round's first report, a changed query none), then the codec, the selection and the
 * randomizer (`makeReport`). The SecAgg+ round itself then runs with `policyOf(floors)`.
 */

import { type DeviceBudget } from "./budget.js";
import { type BookLoader, Codec } from "./codec.js";
import { type Floors, checkEpsLocal } from "./floors.js";
import type { Task } from "./gen/fedhh/v1/coordinator_pb.js";
import { type DrawSource, makeReport, systemDraws } from "./selection.js";

/** A device's items and their counts (fedhh_device.report.DeviceData). */
export interface DeviceData {
  items: readonly string[];
  counts: readonly number[];
}

/** The positions of the ones of the device's report for `task`, or a refusal (thrown). */
export async function reportForTask(task: Task, data: DeviceData, budget: DeviceBudget,
                                    floors: Floors, load?: BookLoader,
                                    draws: DrawSource = systemDraws): Promise<number[]> {
  checkEpsLocal(task.epsLocal, floors);
  return budget.report(task, async () => {
    const codec = await Codec.fromSpec(task.codec, task.maxBits, load);
    return makeReport(data.items, data.counts, task, codec, draws);
  });
}
