"""The h3-103 prompts, part A: people, animals, landscapes, action. Each: a category, the style,
beats (the first opens the clip; each later one is a cut in a text-to-video line, a beat of one
uninterrupted take in a keyframe line), the overall soundscape and the non-diegetic music."""

P = []
def add(cat, style, beats, sound, music):
    P.append(dict(cat=cat, style=style, beats=beats, sound=sound, music=music))

# ---- people ----
add("people", "Cinematic live action, warm natural light",
    ["a wide shot of a potter's workshop at dawn, dust drifting in the window light as an older woman (S1) with silver hair tied back and a clay-streaked linen apron centres a lump of wet clay on a spinning wheel",
     "a close-up of her hands as her thumbs open the clay and a thin wall rises between her fingers, water glistening on the turning surface",
     "a medium shot from the side as she lifts the finished bowl off the wheel with a wire and sets it on a shelf beside a row of drying pots, smiling slightly"],
    "The steady whirr of the wheel, wet slaps of clay, a dripping sponge, birdsong outside the open window.",
    "A solo acoustic guitar, fingerpicked at a slow tempo, warm and unhurried.")
add("people", "Documentary-style handheld live action, overcast daylight",
    ["a medium shot of a fisherman (S1) in a yellow oilskin coat hauling a dripping net over the side of a small wooden boat on a grey, choppy sea",
     "a close-up of silver fish flapping in the net as it spills onto the deck, his rough hands sorting them into a blue crate",
     "a wide shot from a low angle as the boat turns toward a distant harbour wall, gulls wheeling overhead"],
    "Slapping waves against the hull, the creak of rope on a wooden gunwale, the chug of a small diesel engine, gulls crying.",
    "No music.")
add("people", "Cinematic live action, neon night, shallow depth of field",
    ["a medium close-up of a young street food cook (S1) with a black bandana tossing noodles in a flaming wok under a string of red lanterns",
     "a close-up of the wok as flames leap up and soy sauce hisses across the noodles",
     "a medium shot as she slides the noodles into a paper box and hands it across the counter to a customer whose hands reach into frame"],
    "Roaring gas burner, sizzling oil, a metal spatula scraping the wok, a busy night market murmuring behind.",
    "Low, pulsing lo-fi hip-hop beat with a soft electric piano, at a moderate tempo.")
add("people", "Live action, golden hour, slow motion",
    ["a wide shot of a ballet dancer (S1) in a pale grey leotard alone on a rooftop above a city, the sun low behind her",
     "a full shot as she rises onto pointe and turns a slow pirouette, her shadow sweeping across the concrete",
     "a close-up of her face as she finishes the turn, breathing calmly, her eyes closed against the light"],
    "Wind across the rooftop, distant traffic far below, the soft scuff of pointe shoes on concrete.",
    "A sparse piano melody with a sustained string pad, slow and tender.")
add("people", "Cinematic live action, cold blue morning light",
    ["a medium shot of an elderly man (S1) in a thick wool coat feeding pigeons from a paper bag on a park bench covered in frost",
     "a close-up of breadcrumbs falling from his gloved fingers as pigeons crowd and flutter at his feet",
     "a wide shot from behind the bench as a small girl in a red hat (S2) runs up and sits beside him, and he passes her the bag"],
    "Cooing pigeons, flapping wings, crunching frost under small running feet, a distant church bell.",
    "A gentle clarinet melody over soft pizzicato strings, light and warm.")
add("people", "Live action, bright midday, vivid colours",
    ["a wide shot of a busy flower market where a florist (S1) in a green apron arranges sunflowers into tall tin buckets",
     "a close-up of her scissors snipping stems at an angle, drops of water flicking off the leaves",
     "a medium shot as she wraps a bouquet in brown paper, ties it with twine and holds it up toward the camera"],
    "Market chatter, buckets clanking on cobblestones, scissors snipping, paper crinkling.",
    "An upbeat accordion waltz at a lively tempo.")
add("people", "Cinematic live action, candlelit interior, warm tones",
    ["a medium shot of a violinist (S1) in a dark velvet jacket tuning his instrument in an empty wood-panelled concert hall",
     "a close-up of the bow touching the strings, rosin dust catching the candlelight",
     "a slow push-in to a close-up of his face as he begins to play, eyes half closed"],
    "The creak of old floorboards, the faint hiss of candle flames, the violin's tuning notes echoing in the hall.",
    "The violin's own slow melody carries the scene; no other music.")
add("people", "Live action, early morning mist, muted greens",
    ["a wide shot of a tea plantation on steep terraces where a picker (S1) in a wide straw hat moves along the rows with a basket on her back",
     "a close-up of her fingers plucking the two top leaves and a bud and dropping them over her shoulder",
     "a wide aerial shot rising above the terraces as mist rolls slowly over the ridges"],
    "Rustling tea bushes, distant birdsong, soft footsteps on wet earth, a light breeze.",
    "A bamboo flute melody over a soft drone, calm and meditative.")
add("people", "Cinematic live action, rainy evening, reflections",
    ["a medium shot of a cyclist courier (S1) in a reflective jacket weaving through stopped traffic on a rain-soaked avenue",
     "a low close-up of the front wheel slicing through a puddle, spray catching red tail lights",
     "a medium shot as he brakes at a doorway, pulls a parcel from his bag and presses a buzzer"],
    "Steady rain, car horns, tyres hissing on wet asphalt, a bicycle bell, the buzz of an intercom.",
    "Driving electronic pulse with a deep bass line, at a fast tempo.")
add("people", "Live action, soft window light, intimate",
    ["a medium shot of a grandmother (S1) and her grandson (S2) kneading dough together at a flour-dusted kitchen table",
     "a close-up of small hands pressing into the dough beside wrinkled ones, flour puffing up",
     "a medium shot as the boy laughs and dabs flour onto his grandmother's nose, and she laughs back"],
    "Dough thumping on wood, a ticking wall clock, a kettle starting to whistle, soft laughter.",
    "A warm, slow folk melody on a mandolin and upright bass.")
add("people", "Cinematic live action, hard desert sun",
    ["a wide shot of a woman (S1) in a white headscarf leading a camel across rippled orange dunes",
     "a close-up of her sandals sinking into the sand, the camel's broad feet stepping behind",
     "a wide shot from a dune crest as the pair grows small against a vast empty horizon shimmering with heat"],
    "Wind hissing over sand, the soft crunch of footsteps, the camel's low grunts and jingling harness bells.",
    "A solo oud melody over a slow frame drum.")
add("people", "Live action, studio lighting, black background",
    ["a medium close-up of a boxer (S1) with taped hands shadowboxing, sweat beading on his shoulders under a single top light",
     "a close-up of his fists snapping forward in a fast combination",
     "a medium shot as he stops, drops his hands and exhales, steam rising from his skin"],
    "Sharp breaths, the swish of fast punches, feet shuffling on canvas, a heavy exhale.",
    "A slow, heavy hip-hop beat with a deep kick drum.")
add("people", "Cinematic live action, autumn afternoon",
    ["a wide shot of a woman (S1) in a mustard coat walking a tree-lined path as orange leaves fall around her",
     "a close-up of her boots scattering leaves, a dry leaf caught on her lace",
     "a medium shot as she stops beneath a large maple, looks up and catches a falling leaf in her palm"],
    "Crunching leaves, a light breeze through branches, distant children playing.",
    "A soft indie-folk guitar and a hummed vocal melody without words.")

# ---- animals ----
add("animals", "Nature documentary, telephoto, golden light",
    ["a wide shot of a cheetah crouched low in tall savanna grass, her eyes fixed on a herd of gazelles in the distance",
     "a tracking shot at high speed as she bursts from the grass, dust kicking from her paws",
     "a close-up of her face, panting, as she stops and looks back over the empty plain"],
    "Wind in dry grass, then the rapid drumming of paws, scattering hooves, heavy panting.",
    "Tense orchestral strings building to a fast percussive climax.")
add("animals", "Macro nature photography, soft morning light",
    ["an extreme close-up of a honeybee landing on a purple lavender spike, pollen clinging to its legs",
     "a macro shot of the bee pushing its head into a tiny flower, wings trembling",
     "a close-up as the bee lifts off and hovers, its wings a blur against the green background"],
    "A close, buzzing hum of wings, a breeze through the lavender, distant birdsong.",
    "A light pizzicato string melody, playful and quick.")
add("animals", "Underwater documentary, clear blue water",
    ["a wide shot of a green sea turtle gliding over a coral reef, sunbeams dancing on its shell",
     "a close-up of the turtle's head as it nibbles on seagrass, small fish darting around it",
     "a low shot from the sand as the turtle swims up toward the bright surface"],
    "Muffled underwater ambience, bubbles rising, soft clicks and crackles of the reef.",
    "A slow ambient synth pad with a gentle marimba pattern.")
add("animals", "Cinematic live action, snowy forest, overcast",
    ["a wide shot of a red fox trotting across a snowy clearing between dark pine trees",
     "a medium shot as the fox freezes, ears swivelling toward a sound beneath the snow",
     "a slow-motion shot as the fox leaps high and dives nose-first into the snow"],
    "Muffled forest silence, the soft crunch of paws, a faint squeak under the snow, a thump as the fox lands.",
    "A sparse celesta melody over a soft string pad.")
add("animals", "Live action, backyard, bright afternoon",
    ["a medium shot of a golden retriever puppy tugging at a garden hose lying on a lawn",
     "a close-up as the hose suddenly sprays water and the puppy leaps back in surprise",
     "a wide shot as the puppy bounds through the spray, snapping at the droplets with its tail wagging"],
    "Hissing water, excited yips, splashing paws on wet grass, a child's laughter off-screen.",
    "A bouncy ukulele tune at a quick tempo.")
add("animals", "Nature documentary, aerial, dramatic light",
    ["an aerial wide shot of thousands of wildebeest crossing a muddy river, churning the water brown",
     "a low shot at water level as wildebeest plunge from the bank and splash past the camera",
     "a wide shot from the far bank as the herd climbs out and streams across the plain"],
    "Thundering hooves, splashing water, bellowing calls, the rumble of a great herd.",
    "A powerful orchestral score with pounding timpani and soaring horns.")
add("animals", "Live action, cosy interior, lamplight",
    ["a close-up of a tabby cat asleep on a stack of books beside a window streaked with rain",
     "an extreme close-up as one ear twitches and the cat's eyes open slowly",
     "a medium shot as the cat stretches, yawns widely and pads off the books toward a warm radiator"],
    "Rain tapping on glass, a ticking clock, a soft purr, the quiet thump of paws on the floor.",
    "A slow jazz piano trio with brushed drums.")
add("animals", "Nature documentary, tropical rainforest, dappled light",
    ["a medium shot of a scarlet macaw perched on a mossy branch, cracking a nut with its beak",
     "a close-up of its bright red, yellow and blue feathers ruffling as it shakes its head",
     "a wide shot as the macaw spreads its wings and flies across a misty canopy"],
    "Dense jungle ambience, insects buzzing, a loud squawk, the whoosh of wings.",
    "No music.")
add("animals", "Cinematic live action, arctic, pale blue light",
    ["a wide shot of a polar bear mother and two cubs walking across sea ice under a low sun",
     "a medium shot as the cubs tumble and wrestle in the snow behind their mother",
     "a close-up of the mother turning her head to watch them, breath steaming in the cold air"],
    "Howling wind, creaking ice, the cubs' playful growls, crunching snow.",
    "A slow, wide orchestral theme with low brass and strings.")
add("animals", "Live action, farm, misty dawn",
    ["a wide shot of a herd of dairy cows walking along a muddy lane toward a red barn",
     "a close-up of a cow's face, a bell at its neck, breath steaming",
     "a medium shot as a farmer (S1) in green boots opens the barn gate and the cows file inside"],
    "Clanking cow bells, hooves in mud, low mooing, a creaking wooden gate, a rooster in the distance.",
    "A simple harmonica melody at an easy tempo.")
add("animals", "Slow-motion nature footage, river rapids",
    ["a medium shot of a brown bear standing in rushing rapids, watching the water intently",
     "a slow-motion close-up as a salmon leaps from the water and the bear snaps it from the air",
     "a wide shot as the bear wades to a rock and settles down with its catch"],
    "Roaring rapids, splashing water, a sharp snap of jaws, a low grunt.",
    "Dramatic percussion building under low strings, then resolving.")
add("animals", "Macro live action, garden pond, summer",
    ["an extreme close-up of a green frog sitting on a lily pad, its throat pulsing",
     "a close-up as a dragonfly hovers nearby and the frog's tongue flicks out",
     "a medium shot as the frog leaps into the pond, ripples spreading across the lily pads"],
    "Croaking frogs, the buzz of a dragonfly, a small splash, rippling water.",
    "A playful woodwind tune with a bassoon and flute.")
add("animals", "Cinematic live action, mountain ridge, windy",
    ["a wide shot of a golden eagle soaring above a rocky mountain ridge",
     "a close-up of the eagle's head and sharp eyes scanning the slopes below",
     "a tracking shot as the eagle folds its wings and dives steeply toward the valley"],
    "Whistling wind, a piercing eagle cry, the rush of air as it dives.",
    "A soaring orchestral melody with French horns.")
# ---- landscapes ----
add("landscape", "Cinematic aerial footage, sunrise",
    ["an aerial wide shot gliding over a fjord between steep green cliffs, mist lying on the still water",
     "an aerial shot tilting down to a waterfall plunging from the cliff into the fjord",
     "an aerial shot rising above the ridge as the sun breaks over distant snowy peaks"],
    "A distant roar of falling water, wind, faint gulls.",
    "A slow orchestral swell with strings and a solo cello.")
add("landscape", "Time-lapse photography, desert night",
    ["a wide static shot of red sandstone arches under a sky full of stars",
     "a time-lapse as the Milky Way wheels slowly across the sky above the arches",
     "a time-lapse as the sky brightens from deep blue to orange and the arches glow red at dawn"],
    "Near silence, a soft desert wind, the occasional chirp of a night insect.",
    "A deep, slow ambient drone with a distant piano motif.")
add("landscape", "Cinematic live action, tropical beach, midday",
    ["a wide shot of turquoise waves rolling onto a white sand beach lined with leaning palm trees",
     "a low shot at sand level as foam races up the beach and retreats, leaving bubbles",
     "a wide shot from the palms looking out to a small island on the horizon"],
    "Crashing surf, the hiss of retreating foam, rustling palm fronds.",
    "A relaxed steel-drum melody over a soft bass groove.")
add("landscape", "Cinematic live action, autumn forest, fog",
    ["a wide shot of a foggy forest of tall birch trees with yellow leaves",
     "a slow dolly shot along a narrow path covered in fallen leaves",
     "a wide shot as shafts of light break through the fog between the trunks"],
    "Dripping water, distant crows, a soft breeze through leaves.",
    "A melancholic piano piece with soft strings.")
add("landscape", "Drone footage, volcanic landscape, overcast",
    ["an aerial wide shot over black lava fields streaked with bright green moss",
     "an aerial shot approaching a steaming volcanic vent, white plumes rising",
     "an aerial shot pulling back to reveal a glacier beyond the lava field"],
    "Low rumbling, hissing steam, strong wind.",
    "A dark, slow synth score with deep pulses.")
add("landscape", "Cinematic live action, alpine meadow, summer",
    ["a wide shot of an alpine meadow full of wildflowers with snow-capped peaks behind",
     "a close-up of wildflowers swaying as bees move between them",
     "a wide shot as cloud shadows drift across the meadow and the slopes"],
    "Breeze through grass, cowbells in the distance, buzzing insects, a trickling stream.",
    "A bright folk melody on fiddle and guitar.")
add("landscape", "Time-lapse photography, city skyline, dusk to night",
    ["a wide shot of a city skyline on a river at sunset, the towers reflected in the water",
     "a time-lapse as the sky turns purple and office windows light up one by one",
     "a time-lapse as light trails of traffic stream across a bridge under a dark sky"],
    "A distant city hum, faint sirens, a boat horn on the river.",
    "A slow build of electronic arpeggios and a warm pad.")
add("landscape", "Cinematic live action, winter, heavy snowfall",
    ["a wide shot of a small wooden cabin in a snowy valley, smoke rising from its chimney",
     "a close-up of snowflakes settling on a frosted windowpane, warm light glowing inside",
     "a wide shot as the snowfall thickens and the cabin fades into white"],
    "The hush of falling snow, a crackling fire heard from inside, wind in the pines.",
    "A soft music-box melody with a gentle string pad.")
add("landscape", "Aerial live action, rice terraces, after rain",
    ["an aerial wide shot over flooded rice terraces reflecting the cloudy sky like mirrors",
     "an aerial shot following the curving edge of a terrace, a farmer's path along it",
     "an aerial shot rising as sunlight breaks through and the terraces turn gold"],
    "Trickling water between terraces, frogs, distant birds.",
    "A calm melody on a guzheng with soft percussion.")
add("landscape", "Cinematic live action, storm over the plains",
    ["a wide shot of a massive supercell thunderstorm rotating over a flat wheat field",
     "a wide shot as lightning forks from the cloud to the ground",
     "a low shot as wind bends the wheat and the first heavy raindrops hit the soil"],
    "Rolling thunder, a sharp lightning crack, gusting wind, rain starting to pour.",
    "Tense, rising orchestral strings with deep drums.")
add("landscape", "Underwater cinematic, kelp forest",
    ["a wide shot through a towering kelp forest, sunlight streaming from the surface in rays",
     "a slow tracking shot between swaying kelp fronds, small fish hiding among them",
     "a low shot looking up at the surface as a seal swims across the light"],
    "Muffled ocean ambience, the creak of kelp, bubbles rising.",
    "A dreamy ambient piece with soft bells and synth pads.")
add("landscape", "Cinematic live action, canyon river, late afternoon",
    ["a wide shot of a turquoise river winding through a deep red canyon",
     "a medium shot of water rushing over smooth rocks, sunlight glinting on ripples",
     "a wide shot from the rim as the canyon walls glow orange in the setting sun"],
    "Rushing water echoing off canyon walls, a canyon wren's song, wind.",
    "A slow acoustic guitar and slide guitar piece.")
add("landscape", "Time-lapse, northern lights over a frozen lake",
    ["a wide shot of a frozen lake under a starry sky, snowy pines along the shore",
     "a time-lapse as green aurora ribbons ripple across the sky and reflect on the ice",
     "a time-lapse as the aurora turns violet and fades before dawn"],
    "Deep silence, the occasional crack of lake ice, a faint wind.",
    "A slow ethereal choir pad with a soft piano.")

# ---- action ----
add("action", "Cinematic live action, extreme sports, bright snow",
    ["a wide shot of a snowboarder (S1) in an orange jacket dropping into a steep powder slope",
     "a tracking shot as she carves hard, a wave of powder spraying behind her",
     "a slow-motion shot as she launches off a cornice and grabs her board in the air against a blue sky"],
    "Rushing wind, the hiss of the board in powder, a thump on landing, a triumphant shout.",
    "An energetic rock track with driving drums and electric guitar.")
add("action", "Live action sports, stadium floodlights, night",
    ["a wide shot of a football match under floodlights, a striker (S1) in red dribbling past two defenders",
     "a low close-up of the ball as his boot strikes it hard",
     "a slow-motion shot as the ball curls into the top corner and the crowd behind the goal erupts"],
    "A roaring crowd, a sharp thump of the kick, the net rustling, a referee's whistle.",
    "A rousing orchestral anthem with brass and drums.")
add("action", "Cinematic live action, urban parkour, overcast",
    ["a wide shot of a traceur (S1) in a grey hoodie sprinting across a rooftop toward a gap between buildings",
     "a slow-motion shot as he leaps the gap, arms reaching, the street far below",
     "a medium shot as he lands in a roll and springs up running toward a railing"],
    "Pounding footsteps, heavy breathing, the rush of wind during the leap, a thud and skid on landing.",
    "A fast electronic drum and bass track.")
add("action", "Live action, whitewater rafting, sunny",
    ["a wide shot of a yellow raft with six paddlers plunging down a roaring rapid",
     "a close-up of paddles digging into white foam, water crashing over the bow",
     "a wide shot as the raft spins out of the rapid into calm water and the crew raise their paddles"],
    "Thundering rapids, shouted commands, splashing paddles, cheering.",
    "An upbeat rock track with a strong drum beat.")
add("action", "Cinematic live action, motorsport, racetrack",
    ["a low wide shot of a red race car screaming down a straight toward a hairpin bend",
     "a close-up of the front wheel as brake discs glow orange under hard braking",
     "a tracking shot as the car slides through the bend and accelerates away in a cloud of tyre smoke"],
    "A screaming engine, downshifts popping, squealing tyres, a roar as it accelerates.",
    "A pulsing electronic score with fast synth arpeggios.")
add("action", "Live action, surfing, golden hour",
    ["a wide shot of a surfer (S1) paddling into a large glassy wave",
     "a tracking shot from the water as he stands and drops down the steep face",
     "a low shot inside the curling barrel as he rides through with the sunlit lip pouring over him"],
    "The roar of breaking waves, rushing water, a whoop of joy.",
    "A bright surf-rock guitar riff at a fast tempo.")
add("action", "Cinematic live action, martial arts, bamboo forest",
    ["a wide shot of two martial artists (S1, S2) in white and black facing each other in a bamboo grove",
     "a medium shot as they exchange a flurry of fast strikes and blocks with wooden staffs",
     "a slow-motion shot as one sweeps the other's staff away and bamboo leaves swirl around them"],
    "Sharp clacks of wood on wood, rustling bamboo, quick footsteps, sharp exhales.",
    "Rapid taiko drums with a shakuhachi flute melody.")
add("action", "Live action, mountain biking, forest trail",
    ["a wide shot of a mountain biker (S1) in a black helmet racing down a root-covered forest trail",
     "a low close-up as the front tyre hits a rock and the bike bucks over it",
     "a tracking shot as she jumps a fallen log and lands on the dirt without slowing"],
    "Rattling gears, skidding tyres on dirt, snapping twigs, fast breathing.",
    "A driving indie rock track.")
add("action", "Cinematic live action, firefighters, night",
    ["a wide shot of firefighters in reflective gear aiming a hose at a burning warehouse roof",
     "a close-up of a firefighter's (S1) face lit orange by the flames, water mist around her",
     "a wide shot as part of the roof collapses inward in a burst of sparks"],
    "Roaring fire, hissing water, crackling timber, shouted orders, a distant siren.",
    "Tense low strings with a pulsing percussion beat.")
add("action", "Live action, basketball, indoor gym",
    ["a medium shot of a basketball player (S1) dribbling fast between her legs at the top of the key",
     "a tracking shot as she drives past a defender toward the hoop",
     "a slow-motion shot as she rises and lays the ball softly off the backboard into the net"],
    "Squeaking sneakers, a bouncing ball echoing in the gym, the swish of the net.",
    "A confident hip-hop beat at a moderate tempo.")
add("action", "Cinematic live action, horse racing, early morning",
    ["a low wide shot of racehorses thundering around a bend on a dirt track, jockeys crouched",
     "a close-up of hooves throwing up clods of dirt in slow motion",
     "a wide shot as the leading horse crosses the finish line ahead of the pack"],
    "Thundering hooves, snorting horses, jockeys' shouts, a crowd cheering.",
    "A galloping orchestral piece with fast strings.")
add("action", "Live action, rock climbing, sunset",
    ["a wide shot of a climber (S1) in a red shirt on a sheer granite wall high above a valley",
     "a close-up of chalked fingers gripping a thin crack",
     "a medium shot as he pulls onto the top of the wall and stands up against the orange sky"],
    "Wind along the rock, scraping shoes, clinking carabiners, a long exhale.",
    "A rising post-rock guitar piece.")
add("action", "Cinematic live action, car chase, rainy city night",
    ["a low wide shot of a black sedan speeding through a wet intersection, neon signs reflected on the road",
     "a tracking shot alongside the car as it swerves around a delivery truck",
     "a wide shot as a police car skids around the corner behind it, lights flashing"],
    "Roaring engines, screeching tyres, splashing puddles, a wailing siren.",
    "A tense, fast electronic score with heavy bass.")
